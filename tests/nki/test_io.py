"""Kernel I/O: inputs as HBM tensors (numpy, __array__, __dlpack__, .numpy(), torch), numpy
outputs, outputs in shared_hbm, immutable inputs unless declared, write-back of mutations."""
import sys

import numpy as np
import pytest

import nki
import nki.language as nl
import nki.typing as nt


def double(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.multiply(nl.load(a), 2.0))
    return out


class HasArray:
    def __init__(self, a):
        self.a = a

    def __array__(self, dtype=None, copy=None):
        return self.a


class HasNumpy:
    def __init__(self, a):
        self.a = a

    def numpy(self):
        return self.a


@pytest.mark.parametrize("wrap", [lambda a: a, HasArray, HasNumpy, lambda a: np.asarray(a)])
def test_array_like_inputs(wrap, rng):
    a = rng.standard_normal((8, 8), dtype=np.float32)
    out = nki.simulate(double)(wrap(a))
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, 2 * a)


def test_dlpack_input(rng):
    class DL:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()
    a = rng.standard_normal((8, 8), dtype=np.float32)
    np.testing.assert_allclose(nki.simulate(double)(DL(a)), 2 * a)


def test_torch_cpu_tensors_if_available(rng):
    torch = pytest.importorskip("torch")
    a = torch.randn(8, 8)
    np.testing.assert_allclose(nki.simulate(double)(a), 2 * a.numpy(), rtol=1e-6)
    b = torch.randn(8, 8, dtype=torch.bfloat16)
    out = nki.simulate(double)(b)
    assert out.dtype == nl.bfloat16
    np.testing.assert_allclose(out.astype(np.float32), 2 * b.float().numpy())
    assert "torch" in sys.modules


def test_inputs_are_immutable(expect_code):
    def k(a):
        nl.store(a, nl.full(a.shape, 1.0, nl.float32))
    e = expect_code("err_cannot_update_immutable_parameter", k, np.zeros((4, 4), np.float32))
    assert "'a'" in str(e)


def _inc(a):
    nl.store(a, nl.add(nl.load(a), 1.0))


def test_mutable_args_written_back():
    a = np.zeros((4, 4), np.float32)
    res = nki.simulate(_inc, mutable_args=("a",)).run(a)
    np.testing.assert_array_equal(a, 1.0)
    assert res.mutated == ("a",)


def test_mutable_annotation_and_jit_option():
    def k(a: nt.mutable_tensor):
        _inc(a)
    a = np.zeros((4, 4), np.float32)
    nki.simulate(k)(a)
    np.testing.assert_array_equal(a, 1.0)
    k2 = nki.jit(_inc, mutable_args=("a",))
    k2(a)
    np.testing.assert_array_equal(a, 2.0)


def test_mutable_torch_tensor_written_back():
    torch = pytest.importorskip("torch")
    t = torch.zeros(4, 4)
    nki.simulate(_inc, mutable_args=("a",))(t)
    assert torch.all(t == 1)


def test_shape_annotation(expect_code):
    def k(a: nt.tensor[4, 4]):
        return None
    nki.simulate(k)(np.zeros((4, 4), np.float32))
    expect_code("err_annotation_shape_mismatch", k, np.zeros((4, 5), np.float32))


def test_outputs_must_be_shared_hbm_and_written(expect_code):
    def sbuf_out(a):
        return nl.load(a)
    expect_code("err_output_not_in_shared_hbm", sbuf_out, np.zeros((4, 4), np.float32))

    def hbm_out(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.hbm)
        nl.store(out, nl.load(a))
        return out
    expect_code("err_output_not_in_shared_hbm", hbm_out, np.zeros((4, 4), np.float32))

    def unwritten(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        for i in range(0):
            nl.store(out, nl.load(a))
        return out
    expect_code("err_tensor_output_not_written_to", unwritten, np.zeros((4, 4), np.float32))


def test_output_structures(rng):
    a = rng.standard_normal((4, 4), dtype=np.float32)

    def k(a):
        o1 = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        nl.store(o1, t)
        nl.store(o2, nl.negative(t))
        return {"x": o1, "y": [o2]}
    out = nki.simulate(k)(a)
    np.testing.assert_array_equal(out["x"], a)
    np.testing.assert_allclose(out["y"][0], -a)
