"""Vector engine: tensor_tensor, tensor_scalar, tensor_reduce, tensor_copy, memset,
reciprocal, bn_stats/bn_aggr; placement (<= 1 PSUM input), partition and axis rules."""
import numpy as np
import pytest

import nki
import nki.isa as nisa
import nki.language as nl


def _binary_kernel(op, dtype=nl.float32, engine=nisa.engine.unknown):
    def k(a, b):
        out = nl.ndarray(a.shape, dtype, buffer=nl.shared_hbm)
        d = nl.ndarray(a.shape, dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(d, nl.load(a), nl.load(b), op=op, engine=engine)
        nl.store(out, d)
        return out
    return k


@pytest.mark.parametrize("op,ref", [(nl.add, np.add), (nl.subtract, np.subtract),
                                    (nl.multiply, np.multiply), (nl.divide, np.divide),
                                    (nl.maximum, np.maximum), (nl.minimum, np.minimum),
                                    (nl.greater_equal, lambda a, b: (a >= b).astype(np.float32)),
                                    (nl.abs_max, lambda a, b: np.maximum(abs(a), abs(b)))])
def test_tensor_tensor_ops(op, ref, rng):
    a, b = rng.standard_normal((2, 64, 48), dtype=np.float32)
    np.testing.assert_allclose(nki.simulate(_binary_kernel(op))(a, b), ref(a, b), rtol=1e-6)


def test_int32_exact_on_gpsimd():
    a = np.array([[2 ** 29 + 1, 7]], np.int32)
    b = np.array([[2 ** 29 + 2, 5]], np.int32)
    out = nki.simulate(_binary_kernel(nl.add, nl.int32))(a, b)
    np.testing.assert_array_equal(out, a.astype(np.int64) + b)     # exact beyond 2^24
    assert nki.last_run().engine_instructions["gpsimd"] == 1
    out = nki.simulate(_binary_kernel(nl.bitwise_xor, nl.int32))(a, b)
    np.testing.assert_array_equal(out, a ^ b)


# (expected code, dst, data1, data2, options): each operand is a fresh float32 tile (buffer, shape)
# or "a", the kernel's HBM argument [4, 4].
TENSOR_TENSOR_RULES = {
    "partition_mismatch": ("err_num_partition_mismatch", ("sbuf", (64, 8)), ("sbuf", (64, 8)), ("sbuf", (32, 8)), {}),
    "two_psum_inputs": ("err_unsupported_memory", ("sbuf", (64, 8)), ("psum", (64, 8)), ("psum", (64, 8)), {}),
    "hbm_inputs": ("err_unsupported_memory", ("sbuf", (4, 4)), "a", "a", {}),
    "gpsimd_reads_psum": ("err_unsupported_memory", ("sbuf", (64, 8)), ("psum", (64, 8)), ("sbuf", (64, 8)),
                          {"engine": nisa.engine.gpsimd}),
    "not_an_alu_op": ("err_unsupported_op", ("sbuf", (64, 8)), ("sbuf", (64, 8)), ("sbuf", (64, 8)), {"op": nl.exp}),
    "free_size_mismatch": ("err_shape_mismatch", ("sbuf", (64, 8)), ("sbuf", (64, 8)), ("sbuf", (64, 4)), {}),
}


@pytest.mark.parametrize("case", TENSOR_TENSOR_RULES)
def test_tensor_tensor_rules(expect_code, case):
    code, *operands, options = TENSOR_TENSOR_RULES[case]

    def k(a):
        dst, x, y = (a if o == "a" else nl.ndarray(o[1], nl.float32, buffer=getattr(nl, o[0])) for o in operands)
        nisa.tensor_tensor(dst, x, y, **{"op": nl.add, **options})
    expect_code(code, k, np.zeros((4, 4), np.float32))


def test_tensor_scalar_scalars_vectors_and_reverse(rng):
    a = rng.standard_normal((32, 16), dtype=np.float32)
    v = rng.standard_normal((32, 1), dtype=np.float32)

    def k(a, v):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        d = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(d, nl.load(a), nl.subtract, nl.load(v), reverse0=True,
                           op1=nl.multiply, operand1=3.0)
        nl.store(out, d)
        return out
    np.testing.assert_allclose(nki.simulate(k)(a, v), (v - a) * 3.0, rtol=1e-6)


def test_tensor_scalar_rules(expect_code):
    def bad_vector(a):
        d = nl.ndarray((32, 16), nl.float32, buffer=nl.sbuf)
        v = nl.ndarray((32, 2), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(d, d, nl.add, v)
    expect_code("err_shape_mismatch", bad_vector, np.zeros(1, np.float32))

    def scalar_engine_ops(a):
        d = nl.ndarray((32, 16), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(d, d, nl.maximum, 1.0, engine=nisa.engine.scalar)
    expect_code("err_unsupported_op", scalar_engine_ops, np.zeros(1, np.float32))


@pytest.mark.parametrize("op,ref", [(nl.add, np.sum), (nl.maximum, np.max), (nl.minimum, np.min),
                                    (nl.multiply, np.prod)])
def test_tensor_reduce(op, ref, rng):
    a = rng.uniform(0.5, 1.5, (16, 4, 8)).astype(np.float32)

    def k(a):
        out = nl.ndarray((16, 1), nl.float32, buffer=nl.shared_hbm)
        out2 = nl.ndarray((16, 4), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        r = nl.ndarray((16, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(r, op, t, axis=(1, 2), negate=True)
        r2 = nl.ndarray((16, 4, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(r2, op, t, axis=2, keepdims=True)
        nl.store(out, r)
        nl.store(out2, r2.reshape((16, 4)))
        return out, out2
    o1, o2 = nki.simulate(k)(a)
    np.testing.assert_allclose(o1[:, 0], -ref(a, axis=(1, 2)), rtol=1e-5)
    np.testing.assert_allclose(o2, ref(a, axis=2), rtol=1e-5)


@pytest.mark.parametrize("axis", [0, 1, (0, 1), -3])
def test_reduce_only_trailing_free_axes(axis, expect_code):
    def k(a):
        t = nl.ndarray((16, 4, 8), nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((16, 8), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(r, nl.add, t, axis=axis)
    expect_code("err_unsupported_reduce_axis", k, np.zeros(1, np.float32))


def test_tensor_copy_memset_reciprocal(rng, expect_code):
    a = rng.uniform(1, 2, (8, 8)).astype(np.float32)

    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        ps = nl.ndarray(a.shape, nl.float32, buffer=nl.psum)
        nisa.tensor_copy(ps, nl.load(a))                     # SBUF -> PSUM
        r = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(r, ps)                               # reads PSUM
        z = nl.ndarray((8, 2), nl.float32, buffer=nl.sbuf)
        nisa.memset(z, 2.0)
        nisa.tensor_copy(r[:, 0:2], z, engine=nisa.engine.scalar)
        nl.store(out, r)
        return out
    ref = 1 / a
    ref[:, :2] = 2.0
    np.testing.assert_allclose(nki.simulate(k)(a), ref, rtol=1e-6)

    def memset_int_on_float(a):
        nisa.memset(nl.ndarray((8, 8), nl.float32, buffer=nl.sbuf), 0)
    expect_code("err_memset_value_type_mismatch", memset_int_on_float, a)

    def memset_float_on_int(a):
        nisa.memset(nl.ndarray((8, 8), nl.int32, buffer=nl.sbuf), 1.5)
    expect_code("err_memset_value_type_mismatch", memset_float_on_int, a)

    def copy_hbm(a):
        nisa.tensor_copy(nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf), a)
    expect_code("err_unsupported_memory", copy_hbm, a)


def test_bn_stats_aggr(rng, expect_code):
    a = rng.standard_normal((64, 1000), dtype=np.float32) * 3 + 1

    def k(a):
        out = nl.ndarray((64, 2), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        st = nl.ndarray((64, 12), nl.float32, buffer=nl.sbuf)
        nisa.bn_stats(st[:, 0:6], t[:, 0:500])
        nisa.bn_stats(st[:, 6:12], t[:, 500:1000])
        mv = nl.ndarray((64, 2), nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(mv, st)
        nl.store(out, mv)
        return out
    out = nki.simulate(k)(a)
    np.testing.assert_allclose(out[:, 0], a.mean(1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out[:, 1], a.var(1), rtol=1e-4)

    def too_wide(a):
        t = nl.ndarray((64, 600), nl.float32, buffer=nl.sbuf)
        nisa.bn_stats(nl.ndarray((64, 6), nl.float32, buffer=nl.sbuf), t)
    expect_code("err_size_of_dimension_exceed_arch_limit", too_wide, a)
