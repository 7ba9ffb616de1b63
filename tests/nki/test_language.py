"""nki.language high-level ops: element-wise (tiles, scalars, (P,1) vectors), reductions,
softmax, rms_norm, where, matmul/transpose, copy."""
import numpy as np
import pytest

import nki
import nki.language as nl


def _unary(fn):
    def k(a):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        nl.store(out, fn(nl.load(a)))
        return out
    return k


@pytest.mark.parametrize("fn,ref", [
    (nl.exp, np.exp), (nl.abs, np.abs), (nl.sqrt, lambda x: np.sqrt(np.abs(x))),
    (nl.rsqrt, lambda x: 1 / np.sqrt(np.abs(x))), (nl.reciprocal, lambda x: 1 / x),
    (nl.negative, np.negative), (nl.sign, np.sign), (nl.floor, np.floor), (nl.sin, np.sin),
    (nl.erf, None), (nl.logical_not, lambda x: (x == 0).astype(np.float32)),
])
def test_unary(fn, ref, rng):
    a = rng.standard_normal((16, 24), dtype=np.float32) + 0.1
    if fn in (nl.sqrt, nl.rsqrt):
        a = np.abs(a)
    if ref is None:
        from math import erf
        ref = np.vectorize(erf)
    np.testing.assert_allclose(nki.simulate(_unary(fn))(a), ref(a), rtol=2e-6, atol=1e-6)


def test_binary_tiles_scalars_and_vectors(rng):
    a = rng.standard_normal((32, 16), dtype=np.float32)
    v = rng.standard_normal((32, 1), dtype=np.float32)

    def k(a, v):
        o0 = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        o1 = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        o3 = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        o = (o0, o1, o2, o3)    # (a list comprehension would be a loop: err_shared_hbm_...)
        x, vv = nl.load(a), nl.load(v)
        nl.store(o[0], nl.subtract(x, vv))          # (P,1) vector broadcast along free
        nl.store(o[1], nl.subtract(vv, x))          # ... reversed
        nl.store(o[2], nl.maximum(x, 0.25))         # scalar
        nl.store(o[3], nl.power(2.0, nl.abs(x)))    # scalar first (reversed)
        return o
    o = nki.simulate(k)(a, v)
    np.testing.assert_allclose(o[0], a - v, rtol=1e-6)
    np.testing.assert_allclose(o[1], v - a, rtol=1e-6)
    np.testing.assert_allclose(o[2], np.maximum(a, 0.25))
    np.testing.assert_allclose(o[3], 2.0 ** np.abs(a), rtol=1e-5)


def test_binary_errors_and_dtype(expect_code, rng):
    def partitions(a):
        nl.add(nl.ndarray((32, 4), nl.float32), nl.ndarray((1, 4), nl.float32))
    e = expect_code("err_num_partition_mismatch", partitions, np.zeros(1, np.float32))
    assert "broadcast_to" in str(e)

    def shapes(a):
        nl.add(nl.ndarray((32, 4), nl.float32), nl.ndarray((32, 3), nl.float32))
    expect_code("err_shape_mismatch", shapes, np.zeros(1, np.float32))

    def on_hbm(a):
        nl.exp(a)
    expect_code("err_unsupported_memory", on_hbm, np.zeros((2, 2), np.float32))
    seen = {}

    def k(a):
        x = nl.load(a)
        seen["d1"] = nl.add(x, nl.copy(x, dtype=nl.bfloat16)).dtype
        seen["d2"] = nl.multiply(x, 2, dtype=nl.bfloat16).dtype
        seen["d3"] = nl.add(nl.copy(x, dtype=nl.bfloat16), 1.0).dtype
    nki.simulate(k)(np.zeros((2, 2), np.float32))
    assert seen == {"d1": nl.float32, "d2": nl.bfloat16, "d3": nl.bfloat16}


@pytest.mark.parametrize("fn,ref", [(nl.sum, np.sum), (nl.max, np.max), (nl.min, np.min),
                                    (nl.mean, np.mean), (nl.var, np.var), (nl.prod, np.prod)])
def test_reductions(fn, ref, rng):
    a = rng.uniform(0.5, 1.5, (16, 4, 8)).astype(np.float32)

    def k(a):
        o1 = nl.ndarray((16, 4), nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((16, 1), nl.float32, buffer=nl.shared_hbm)
        x = nl.load(a)
        nl.store(o1, fn(x, axis=2))
        nl.store(o2, fn(x, axis=(1, 2)))
        return o1, o2
    o1, o2 = nki.simulate(k)(a)
    np.testing.assert_allclose(o1, ref(a, axis=2), rtol=1e-5)
    np.testing.assert_allclose(o2[:, 0], ref(a, axis=(1, 2)), rtol=1e-5)


def test_reduction_axis_rule(expect_code):
    def k(a):
        nl.sum(nl.load(a), axis=0)
    e = expect_code("err_unsupported_reduce_axis", k, np.zeros((4, 4), np.float32))
    assert "partition" in str(e)

    def k2(a):
        nl.max(nl.ndarray((4, 4, 4), nl.float32), axis=1)
    expect_code("err_unsupported_reduce_axis", k2, np.zeros((4, 4), np.float32))


def test_all_and_where(rng):
    a = rng.standard_normal((8, 8), dtype=np.float32)

    def k(a):
        o1 = nl.ndarray((8, 8), nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((8, 1), nl.float32, buffer=nl.shared_hbm)
        x = nl.load(a)
        pos = nl.greater(x, 0.0)
        nl.store(o1, nl.where(pos, x, -1.0))
        nl.store(o2, nl.all(pos, axis=1))
        return o1, o2
    o1, o2 = nki.simulate(k)(a)
    np.testing.assert_array_equal(o1, np.where(a > 0, a, -1.0))
    np.testing.assert_array_equal(o2[:, 0], (a > 0).all(1).astype(np.float32))


def test_softmax_and_rms_norm(rng):
    a = rng.standard_normal((64, 96), dtype=np.float32)
    w = rng.standard_normal((1, 96), dtype=np.float32)

    def k(a, w):
        o1 = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        nl.store(o1, nl.softmax(x, axis=1))
        nl.store(o2, nl.rms_norm(x, nl.load(w), axis=1, n=96, epsilon=1e-5))
        return o1, o2
    o1, o2 = nki.simulate(k)(a, w)
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(o1, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(o2, a / np.sqrt((a * a).mean(1, keepdims=True) + 1e-5) * w,
                               rtol=1e-5, atol=1e-6)


def test_matmul_and_transpose(rng):
    x = rng.standard_normal((96, 64), dtype=np.float32)     # [M, K]
    xT = np.ascontiguousarray(x.T)                           # [K, M]
    y = rng.standard_normal((64, 200), dtype=np.float32)    # [K, N]

    def k(x, xT, y):
        o1 = nl.ndarray((96, 200), nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((96, 200), nl.float32, buffer=nl.shared_hbm)
        o3 = nl.ndarray((64, 96), nl.float32, buffer=nl.shared_hbm)
        yt = nl.load(y)
        nl.store(o1, nl.copy(nl.matmul(nl.load(x), yt)))
        nl.store(o2, nl.copy(nl.matmul(nl.load(xT), yt, transpose_x=True)))
        nl.store(o3, nl.copy(nl.transpose(nl.load(x))))
        return o1, o2, o3
    o1, o2, o3 = nki.simulate(k)(x, xT, y)
    np.testing.assert_allclose(o1, x @ y, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(o2, x @ y, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(o3, x.T)


def test_matmul_transpose_limits(expect_code):
    def wide(a):
        nl.transpose(nl.ndarray((16, 200), nl.float32))
    expect_code("err_size_of_dimension_exceed_arch_limit", wide, np.zeros(1, np.float32))

    def rank3(a):
        nl.transpose(nl.ndarray((16, 2, 2), nl.float32))
    expect_code("err_exceed_max_supported_dimension", rank3, np.zeros(1, np.float32))

    def moving(a):
        nl.matmul(nl.ndarray((64, 64), nl.float32), nl.ndarray((64, 600), nl.float32),
                  transpose_x=True)
    expect_code("err_size_of_dimension_exceed_arch_limit", moving, np.zeros(1, np.float32))

    def psum_input(a):
        nl.matmul(nl.ndarray((64, 64), nl.float32, buffer=nl.psum), nl.ndarray((64, 64), nl.float32))
    expect_code("err_unsupported_memory", psum_input, np.zeros(1, np.float32))


def test_creation_ops():
    def k(a):
        o = nl.ndarray((4, 12), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((4, 12), nl.float32)
        t[:, 0:4] = nl.zeros((4, 4), nl.float32)
        t[:, 4:8] = nl.ones((4, 4), nl.float32)
        t[:, 8:12] = nl.full((4, 4), 7.0, nl.float32)
        nl.store(o, t)
        return o
    ref = np.concatenate([np.zeros((4, 4)), np.ones((4, 4)), np.full((4, 4), 7.0)], axis=1)
    np.testing.assert_array_equal(nki.simulate(k)(np.zeros(1, np.float32)), ref)

    def ident(a):
        o = nl.ndarray((8, 8), nl.float32, buffer=nl.shared_hbm)
        nl.store(o, nl.load(nl.shared_identity_matrix(8, dtype=nl.float32)))
        return o
    np.testing.assert_array_equal(nki.simulate(ident)(np.zeros(1, np.float32)), np.eye(8))
