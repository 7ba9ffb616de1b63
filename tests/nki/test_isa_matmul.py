"""Tensor engine: nc_matmul (stationary.T @ moving, automatic PSUM accumulation) and
nc_transpose, with the 128/128/512 limits, one-bank outputs and placement/dtype rules."""
import ml_dtypes
import numpy as np
import pytest

import nki
import nki.isa as nisa
import nki.language as nl


def _mm_kernel(accumulate_plan, M=64, N=256):
    """lhsT [K*n, M], rhs [K*n, N]: n matmuls into one PSUM tile with the given accumulate args."""
    def k(lhsT, rhs):
        out = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
        ps = nl.ndarray((M, N), nl.float32, buffer=nl.psum)
        for i, acc in enumerate(accumulate_plan):
            s = nl.load(lhsT[i * 128:(i + 1) * 128])
            m = nl.load(rhs[i * 128:(i + 1) * 128])
            nisa.nc_matmul(ps, s, m, accumulate=acc)
        nl.store(out, nl.copy(ps))
        return out
    return k


def test_single_matmul(rng):
    l = rng.standard_normal((128, 64), dtype=np.float32)
    r = rng.standard_normal((128, 256), dtype=np.float32)
    np.testing.assert_allclose(nki.simulate(_mm_kernel([None]))(l, r), l.T @ r, rtol=1e-4, atol=1e-4)


def test_automatic_accumulation_and_overwrite(rng):
    l = rng.standard_normal((384, 64), dtype=np.float32)
    r = rng.standard_normal((384, 256), dtype=np.float32)
    parts = [l[i * 128:(i + 1) * 128].T @ r[i * 128:(i + 1) * 128] for i in range(3)]
    out = nki.simulate(_mm_kernel([None, None, None]))(l, r)
    np.testing.assert_allclose(out, sum(parts), rtol=1e-4, atol=1e-3)
    out = nki.simulate(_mm_kernel([None, None, False]))(l, r)       # False restarts the group
    np.testing.assert_allclose(out, parts[2], rtol=1e-4, atol=1e-3)
    out = nki.simulate(_mm_kernel([None, True, True]))(l, r)
    np.testing.assert_allclose(out, sum(parts), rtol=1e-4, atol=1e-3)


def test_accumulate_true_needs_matmul_initialised_psum(expect_code, rng):
    l = rng.standard_normal((128, 64), dtype=np.float32)
    r = rng.standard_normal((128, 256), dtype=np.float32)
    expect_code("err_psum_accumulate_uninitialized", _mm_kernel([True]), l, r)

    def after_memset(lhsT, rhs):
        ps = nl.ndarray((64, 256), nl.float32, buffer=nl.psum)
        nisa.memset(ps, 0.0)
        nisa.nc_matmul(ps, nl.load(lhsT), nl.load(rhs), accumulate=True)
    expect_code("err_psum_accumulate_uninitialized", after_memset, l, r)


def test_memset_psum_then_auto_matmul_overwrites(rng):
    l = rng.standard_normal((128, 64), dtype=np.float32)
    r = rng.standard_normal((128, 256), dtype=np.float32)

    def k(lhsT, rhs):
        out = nl.ndarray((64, 256), nl.float32, buffer=nl.shared_hbm)
        ps = nl.zeros((64, 256), nl.float32, buffer=nl.psum)
        nisa.memset(ps, 5.0)
        nisa.nc_matmul(ps, nl.load(lhsT), nl.load(rhs))
        nl.store(out, nl.copy(ps))
        return out
    np.testing.assert_allclose(nki.simulate(k)(l, r), l.T @ r, rtol=1e-4, atol=1e-4)


def _shapes_kernel(K, M, N, KM=None, dst_buf=nl.psum, dst_shape=None, s_dt=nl.float32,
                   m_dt=nl.float32, d_dt=nl.float32, s_buf=nl.sbuf):
    def k(a):
        s = nl.ndarray((K, M), s_dt, buffer=s_buf)
        m = nl.ndarray((KM or K, N), m_dt, buffer=nl.sbuf)
        d = nl.ndarray(dst_shape or (M, N), d_dt, buffer=dst_buf)
        nisa.nc_matmul(d, s, m)
    return k


@pytest.mark.parametrize("kw,code", [
    (dict(K=128, M=256, N=128, dst_shape=(128, 128)), "err_size_of_dimension_exceed_arch_limit"),
    (dict(K=128, M=128, N=1024), "err_size_of_dimension_exceed_arch_limit"),
    (dict(K=128, M=64, N=128, KM=64), "err_num_partition_mismatch"),
    (dict(K=128, M=64, N=128, dst_shape=(64, 64)), "err_shape_mismatch"),
    (dict(K=128, M=64, N=128, dst_buf=nl.sbuf), "err_unsupported_memory"),
    (dict(K=128, M=64, N=128, s_buf=nl.psum), "err_unsupported_memory"),
    (dict(K=128, M=64, N=128, s_dt=nl.bfloat16), "err_unsupported_dtype"),
    (dict(K=128, M=64, N=128, s_dt=nl.int32, m_dt=nl.int32), "err_unsupported_dtype"),
    (dict(K=128, M=64, N=128, s_dt=nl.bfloat16, m_dt=nl.bfloat16, d_dt=nl.bfloat16),
     "err_unsupported_dtype"),
])
def test_matmul_limits(kw, code, expect_code):
    expect_code(code, _shapes_kernel(**kw), np.zeros(1, np.float32))


def test_bf16_psum_output_allowed_on_trn3(rng):
    """trn3 writes a bf16 matmul result straight into PSUM; trn2 (the default) rejects the same kernel."""
    lhsT = rng.standard_normal((128, 64)).astype(ml_dtypes.bfloat16)
    rhs = rng.standard_normal((128, 128)).astype(ml_dtypes.bfloat16)

    def k(lhsT, rhs):
        out = nl.ndarray((64, 128), nl.bfloat16, buffer=nl.shared_hbm)
        ps = nl.ndarray((64, 128), nl.bfloat16, buffer=nl.psum)
        nisa.nc_matmul(ps, nl.load(lhsT), nl.load(rhs))
        nl.store(out, nl.copy(ps))
        return out
    out = nki.simulate(k, target="trn3")(lhsT, rhs)
    ref = lhsT.astype(np.float32).T @ rhs.astype(np.float32)
    assert out.dtype == ml_dtypes.bfloat16 and out.shape == (64, 128)
    np.testing.assert_allclose(out.astype(np.float32), ref, rtol=2e-2, atol=5e-2)  # bf16 rounding of the sum
    with pytest.raises(nki.NkiValidationError) as ei:
        nki.simulate(k, target="trn2")(lhsT, rhs)
    assert ei.value.code == "err_unsupported_dtype"


def test_output_must_stay_in_one_bank(expect_code):
    def k(a):
        s = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        m = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        ps = nl.ndarray((64, 1024), nl.float32, buffer=nl.psum)     # two banks
        nisa.nc_matmul(ps[:, 256:768], s, m)                         # straddles banks
    e = expect_code("err_psum_bank_overflow", k, np.zeros(1, np.float32))
    assert "2048" in str(e)

    def ok(a):
        s = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        m = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        ps = nl.ndarray((64, 1024), nl.float32, buffer=nl.psum)
        nisa.memset(s, 0.0)
        nisa.memset(m, 0.0)
        nisa.nc_matmul(ps[:, 512:1024], s, m)                        # second bank, aligned
    nki.simulate(ok)(np.zeros(1, np.float32))


def test_bf16_and_fp8_inputs_accumulate_in_fp32(rng):
    for dtype in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3):
        l = rng.standard_normal((128, 32)).astype(dtype)
        r = rng.standard_normal((128, 64)).astype(dtype)
        out = nki.simulate(_mm_kernel([None], M=32, N=64))(l, r)
        ref = l.astype(np.float32).T @ r.astype(np.float32)
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4)


def test_double_row_needs_trn2(expect_code):
    def k(a):
        s = nl.ndarray((128, 64), nl.float8_e4m3, buffer=nl.sbuf)
        m = nl.ndarray((128, 128), nl.float8_e4m3, buffer=nl.sbuf)
        ps = nl.ndarray((64, 128), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(ps, s, m, perf_mode=nisa.matmul_perf_mode.double_row)
    nki.simulate(k, target="trn2")(np.zeros(1, np.float32))
    with pytest.raises(nki.NkiValidationError) as ei:
        nki.simulate(k, target="trn1")(np.zeros(1, np.float32))
    assert ei.value.code == "err_unsupported_arch"


def test_nc_transpose_tensor_and_vector(rng):
    a = rng.standard_normal((96, 128), dtype=np.float32)

    def k(a):
        out = nl.ndarray((128, 96), a.dtype, buffer=nl.shared_hbm)
        ps = nl.ndarray((128, 96), nl.float32, buffer=nl.psum)
        nisa.nc_transpose(ps, nl.load(a))                  # Tensor engine
        nl.store(out, nl.copy(ps))
        return out
    np.testing.assert_array_equal(nki.simulate(k)(a), a.T)
    assert nki.last_run().engine_instructions["tensor"] == 1

    b = a[:32, :16].copy()

    def kv(a):
        out = nl.ndarray((16, 32), a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((16, 32), a.dtype, buffer=nl.sbuf)
        nisa.nc_transpose(t, nl.load(a), engine=nisa.engine.vector)
        nl.store(out, t)
        return out
    np.testing.assert_array_equal(nki.simulate(kv)(b), b.T)


def test_nc_transpose_limits(expect_code):
    def too_wide(a):
        t = nl.ndarray((64, 256), nl.float32, buffer=nl.sbuf)
        ps = nl.ndarray((128, 64), nl.float32, buffer=nl.psum)
        nisa.nc_transpose(ps, t)
    expect_code("err_size_of_dimension_exceed_arch_limit", too_wide, np.zeros(1, np.float32))

    def vector_too_big(a):
        t = nl.ndarray((64, 16), nl.float32, buffer=nl.sbuf)
        d = nl.ndarray((16, 64), nl.float32, buffer=nl.sbuf)
        nisa.nc_transpose(d, t, engine=nisa.engine.vector)
    expect_code("err_size_of_dimension_exceed_arch_limit", vector_too_big, np.zeros(1, np.float32))
