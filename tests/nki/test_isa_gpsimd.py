"""GpSimd: iota, affine_select (causal masks), tensor_partition_reduce; SBUF only."""
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def test_iota():
    def k(a):
        out = nl.ndarray((8, 12), nl.int32, buffer=nl.shared_hbm)
        t = nl.ndarray((8, 12), nl.int32, buffer=nl.sbuf)
        nisa.iota(t, pattern=[[100, 3], [1, 4]], offset=5, channel_multiplier=1000)
        nl.store(out, t)
        return out
    p, i, j = np.meshgrid(np.arange(8), np.arange(3), np.arange(4), indexing="ij")
    ref = (5 + 1000 * p + 100 * i + j).reshape(8, 12)
    np.testing.assert_array_equal(nki.simulate(k)(np.zeros(1, np.float32)), ref)


def test_affine_select_causal_mask(rng):
    a = rng.standard_normal((16, 16), dtype=np.float32)

    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        m = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.affine_select(m, pattern=[[-1, 16]], channel_multiplier=1, on_true_tile=t,
                           on_false_value=-9999.0, cmp_op=nl.greater_equal)
        nl.store(out, m)
        return out
    np.testing.assert_array_equal(nki.simulate(k)(a), np.where(np.tril(np.ones((16, 16))) > 0, a, -9999.0))


def test_gpsimd_never_touches_psum(expect_code):
    def k(a):
        ps = nl.ndarray((16, 16), nl.float32, buffer=nl.psum)
        d = nl.ndarray((16, 16), nl.float32, buffer=nl.sbuf)
        nisa.affine_select(d, pattern=[[-1, 16]], channel_multiplier=1, on_true_tile=ps,
                           on_false_value=0.0, cmp_op=nl.greater_equal)
    e = expect_code("err_unsupported_memory", k, np.zeros(1, np.float32))
    assert "GpSimd" in str(e)

    def iota_psum(a):
        nisa.iota(nl.ndarray((16, 16), nl.float32, buffer=nl.psum), pattern=[[1, 16]])
    expect_code("err_unsupported_memory", iota_psum, np.zeros(1, np.float32))

    def power_psum(a):
        ps = nl.ndarray((16, 16), nl.float32, buffer=nl.psum)
        nl.power(ps, 2.0)                                 # nl.power runs on GpSimd
    expect_code("err_unsupported_memory", power_psum, np.zeros(1, np.float32))


def test_iota_pattern_must_cover_dst(expect_code):
    def k(a):
        nisa.iota(nl.ndarray((8, 12), nl.int32, buffer=nl.sbuf), pattern=[[1, 10]])
    expect_code("err_shape_mismatch", k, np.zeros(1, np.float32))


def test_tensor_partition_reduce(rng):
    a = rng.standard_normal((32, 8), dtype=np.float32)

    def k(a):
        out = nl.ndarray((1, 8), a.dtype, buffer=nl.shared_hbm)
        r = nl.ndarray((1, 8), a.dtype, buffer=nl.sbuf)
        nisa.tensor_partition_reduce(r, nl.add, nl.load(a))
        nl.store(out, r)
        return out
    np.testing.assert_allclose(nki.simulate(k)(a)[0], a.sum(0), rtol=1e-5)
