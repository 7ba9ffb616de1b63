"""nisa.dma_copy: HBM<->SBUF copies with casts; never PSUM; shape rules."""
import ml_dtypes
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl

A = np.arange(32, dtype=np.float32).reshape(4, 8)


def test_round_trip_with_cast():
    def k(a):
        out = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)                      # fp32 -> bf16 on the way in
        nisa.dma_copy(dst=out, src=t)
        return out
    out = nki.simulate(k)(A + 0.001)
    np.testing.assert_array_equal(out, (A + 0.001).astype(ml_dtypes.bfloat16))


def test_sbuf_to_sbuf_and_hbm_to_hbm():
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        scratch = nl.ndarray(a.shape, a.dtype, buffer=nl.hbm)
        nisa.dma_copy(dst=scratch, src=a)
        t1 = nl.load(scratch)
        t2 = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t2, src=t1)
        nisa.dma_copy(dst=out, src=t2)
        return out
    np.testing.assert_array_equal(nki.simulate(k)(A), A)


def test_broadcast_source():
    def k(a):
        out = nl.ndarray((4, 8), a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a[0:1, :])            # [1, 8] broadcast to [4, 8]
        return out
    np.testing.assert_array_equal(nki.simulate(k)(A), np.broadcast_to(A[0:1], (4, 8)))


def test_psum_is_rejected(expect_code):
    def from_psum(a):
        ps = nl.ndarray((4, 8), nl.float32, buffer=nl.psum)
        nisa.dma_copy(dst=a, src=ps)
    e = expect_code("err_unsupported_memory", from_psum, A)
    assert "psum" in str(e) and "tensor_copy" in str(e)

    def to_psum(a):
        ps = nl.ndarray((4, 8), nl.float32, buffer=nl.psum)
        nisa.dma_copy(dst=ps, src=a)
    expect_code("err_unsupported_memory", to_psum, A)


def test_shape_rules(expect_code):
    def smaller_dst(a):
        t = nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
    expect_code("err_store_dst_shape_smaller_than_other_shape", smaller_dst, A)

    def mismatch(a):
        t = nl.ndarray((4, 16), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[:, 0:3])
    expect_code("err_shape_mismatch", mismatch, A)


def test_load_store_rules(expect_code):
    def load_sbuf(a):
        nl.load(nl.load(a))
    e = expect_code("err_unsupported_memory", load_sbuf, A)
    assert "'hbm'" in str(e) and "'sbuf'" in str(e)

    def store_psum(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.ndarray((4, 8), nl.float32, buffer=nl.psum))
        return out
    expect_code("err_unsupported_memory", store_psum, A)

    def load_too_many_partitions(a):
        nl.load(a)
    expect_code("err_num_partition_exceed_arch_limit", load_too_many_partitions,
                np.zeros((256, 4), np.float32))


def test_load_transpose2d():
    def k(a):
        out = nl.ndarray((8, 4), a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load_transpose2d(a))
        return out
    np.testing.assert_array_equal(nki.simulate(k)(A), A.T)
