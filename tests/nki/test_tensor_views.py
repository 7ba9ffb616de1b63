"""NkiTensor: strided views share storage; indexing rules for on-chip vs HBM; view errors."""
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


def _run(fn, *args):
    return nki.simulate(fn)(*args)


def test_slicing_shapes_and_int_index_rules():
    seen = {}

    def k(a):
        t = nl.ndarray((128, 4, 64), nl.float32, buffer=nl.sbuf)
        seen["p_int"] = t[3].shape                 # partition int index keeps size 1
        seen["f_int"] = t[:, 2].shape              # free int index drops the dim
        seen["both"] = t[:, 2, 5].shape            # ... unless that leaves < 2 dims
        seen["step"] = t[0:128:2, :, 1:64:3].shape
        seen["hbm_int"] = a[3].shape               # HBM int index drops
        seen["ellipsis"] = t[..., 0:8].shape
        seen["ds"] = a[nl.ds(2, 3), :].shape
        out = nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.full((1, 1), 0.0, nl.float32))
        return out
    _run(k, np.zeros((8, 16), np.float32))
    assert seen == {"p_int": (1, 4, 64), "f_int": (128, 64), "both": (128, 1),
                    "step": (64, 4, 21), "hbm_int": (16,), "ellipsis": (128, 4, 8), "ds": (3, 16)}


def test_views_share_storage_and_strides(rng):
    a = rng.standard_normal((64, 32), dtype=np.float32)

    def k(a):
        out = nl.ndarray((64, 32), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        half = t[:, 0:16]                       # view of the left half
        nisa.tensor_scalar(half, half, nl.multiply, 2.0)   # write through the view
        nl.store(out, t)
        return out
    ref = a.copy()
    ref[:, :16] *= 2
    np.testing.assert_allclose(_run(k, a), ref)


def test_reshape_permute_broadcast_ap_on_hbm(rng):
    a = rng.standard_normal((8, 6), dtype=np.float32)

    def k(a):
        out = nl.ndarray((6, 8), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a.permute(1, 0))      # strided HBM view: a transpose
        return out
    np.testing.assert_allclose(_run(k, a), a.T)

    def k2(a):
        out = nl.ndarray((4, 12), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a.reshape((4, 12))))
        return out
    np.testing.assert_allclose(_run(k2, a), a.reshape(4, 12))

    def k3(a):
        out = nl.ndarray((8, 3), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a.ap([[6, 8], [2, 3]], offset=1)))   # every other column from 1
        return out
    np.testing.assert_allclose(_run(k3, a), a[:, 1::2])

    def k4(a):
        out = nl.ndarray((8, 6), nl.float32, buffer=nl.shared_hbm)
        row = nl.load(a[0:1, :])
        t = nl.ndarray((8, 6), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(t, nl.broadcast_to(row, (8, 6)))          # partition broadcast view
        nl.store(out, t)
        return out
    np.testing.assert_allclose(_run(k4, a), np.broadcast_to(a[0:1], (8, 6)))


def test_get_pattern_and_contiguity():
    info = {}

    def k(a):
        info["pat"] = a[:, 2:4].get_pattern()
        info["c1"] = a.is_contiguous()
        info["c2"] = a[:, 2:4].is_contiguous()
        info["expand"] = a.expand_dim(1).shape
        info["squeeze"] = a[0:1].reshape((1, 10)).expand_dim(0).squeeze_dim(0).shape
        info["view"] = a.view(nl.int32).dtype
        return None
    _run(k, np.zeros((4, 10), np.float32))
    assert info == {"pat": [[10, 4], [1, 2]], "c1": True, "c2": False, "expand": (4, 1, 10),
                    "squeeze": (1, 10), "view": np.dtype(np.int32)}


def test_static_out_of_bounds(expect_code):
    def k(a):
        return nl.load(a[0:4096])
    e = expect_code("err_tensor_access_out_of_bound", k, np.zeros((4000, 4), np.float32))
    assert "[0, 4095]" in str(e) and "4000" in str(e)

    def k2(a):
        return nl.load(a[:, 7])
    expect_code("err_tensor_access_out_of_bound", k2, np.zeros((4, 4), np.float32))


def test_invalid_views(expect_code):
    def reshape_count(a):
        a.reshape((3, 3))
    expect_code("err_invalid_view", reshape_count, np.zeros((2, 4), np.float32))

    def permute_partition(a):
        t = nl.ndarray((16, 8), nl.float32, buffer=nl.sbuf)
        t.permute(1, 0)
    expect_code("err_invalid_view", permute_partition, np.zeros((2, 4), np.float32))

    def reshape_partition(a):
        t = nl.ndarray((16, 8), nl.float32, buffer=nl.sbuf)
        t.reshape((8, 16))
    expect_code("err_invalid_view", reshape_partition, np.zeros((2, 4), np.float32))

    def ap_partition_stride(a):
        t = nl.ndarray((16, 8), nl.float32, buffer=nl.sbuf)
        t.ap([[4, 16], [1, 4]])
    expect_code("err_invalid_view", ap_partition_stride, np.zeros((2, 4), np.float32))

    def write_broadcast(a):
        row = nl.load(a[0:1, :])
        nisa.memset(nl.broadcast_to(row, (8, 4)), 0.0)
    expect_code("err_invalid_view", write_broadcast, np.zeros((2, 4), np.float32))


def test_python_operators_and_setitem(rng):
    a = rng.standard_normal((16, 8), dtype=np.float32)
    b = rng.standard_normal((16, 8), dtype=np.float32)

    def k(a, b):
        out = nl.ndarray((16, 8), nl.float32, buffer=nl.shared_hbm)
        x, y = nl.load(a), nl.load(b)
        z = (x + y) * 2.0 - y / 4.0
        z += x
        out[...] = z                                   # HBM assignment is a DMA
        return out
    np.testing.assert_allclose(_run(k, a, b), (a + b) * 2 - b / 4 + a, rtol=1e-6)
