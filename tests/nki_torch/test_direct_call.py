"""An @nki.jit kernel called with neuron tensors runs on their memory and returns neuron
tensors; fake/meta tensors trace shapes without computing; CPU keeps numpy semantics."""
import numpy as np
import pytest
import torch
from tests.nki_torch.conftest import add_inplace_kernel, add_kernel, neuron, scale_kernel, sum_and_max_kernel, tile_add_kernel

import nki
import torch_neuronx
from torch_neuronx.nki_integration import handler, wrap_nki


def test_neuron_in_neuron_out():
    a, b = neuron(128, 64), neuron(128, 64, seed=1)
    c = add_kernel(a, b)
    assert isinstance(c, torch.Tensor) and c.device == a.device
    torch.testing.assert_close(c.cpu(), a.cpu() + b.cpu())
    assert nki.last_run().total_ns > 0           # it ran on the simulator


def test_outputs_follow_the_arguments_device():
    a = neuron(8, 8).to("neuron:1")
    assert add_kernel(a, a).device == torch.device("neuron:1")


def test_inputs_are_zero_copy_views_of_device_memory():
    base = neuron(16, 40)
    view = base[2:10, 5:37].t()                  # offset + non-contiguous
    arr = handler._as_numpy(view)
    assert arr.__array_interface__["data"][0] == view.data_ptr()
    assert arr.strides == tuple(s * 4 for s in view.stride())
    np.testing.assert_array_equal(arr, view.cpu().numpy())
    b16 = neuron(8, 8, dtype=torch.bfloat16)
    assert handler._as_numpy(b16).__array_interface__["data"][0] == b16.data_ptr()


def test_mutable_argument_written_in_place_on_device():
    base = torch.zeros(8, 16, device="neuron")
    x = base[:, 4:12]                            # a strided view into a larger tensor
    y = neuron(8, 8)
    ptr = x.data_ptr()
    assert add_inplace_kernel(x, y) is None
    assert x.data_ptr() == ptr
    torch.testing.assert_close(base[:, 4:12].cpu(), y.cpu())
    assert torch.all(base[:, :4].cpu() == 0) and torch.all(base[:, 12:].cpu() == 0)


def test_bf16_tuple_outputs_constants_and_grid():
    a = neuron(128, 32, dtype=torch.bfloat16)
    s, m = sum_and_max_kernel(a)
    assert s.dtype == torch.float32 and m.dtype == torch.bfloat16 and s.shape == (128, 1)
    torch.testing.assert_close(s.cpu(), a.cpu().float().sum(1, keepdim=True), rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(m.cpu(), a.cpu().amax(1, keepdim=True))
    torch.testing.assert_close(scale_kernel(a, 0.5).cpu(), a.cpu() * 0.5)
    x, y = neuron(128, 16), neuron(128, 16, seed=3)
    torch.testing.assert_close(tile_add_kernel[4](x, y).cpu(), x.cpu() + y.cpu())


def test_meta_and_fake_tensors_trace_without_computing(monkeypatch):
    from torch._subclasses.fake_tensor import FakeTensorMode

    from nki.simulator import runner
    computed = []
    real = runner.run_kernel

    def spy(*a, **kw):
        computed.append(kw.get("compute", True))
        return real(*a, **kw)
    monkeypatch.setattr(runner, "run_kernel", spy)
    out = add_kernel(torch.empty(4, 5, device="meta"), torch.empty(4, 5, device="meta"))
    assert out.device.type == "meta" and out.shape == (4, 5)
    with FakeTensorMode() as mode:
        a = mode.from_tensor(neuron(128, 8, dtype=torch.bfloat16))
        s, m = sum_and_max_kernel(a)
    assert s.device.type == "neuron" and s.shape == (128, 1) and s.dtype == torch.float32
    assert m.dtype == torch.bfloat16
    assert computed and not any(computed)        # traced only, nothing computed


def test_cpu_tensors_keep_numpy_semantics_but_wrap_nki_returns_torch():
    a = torch.randn(8, 8)
    assert isinstance(add_kernel(a, a), np.ndarray)
    out = wrap_nki(add_kernel)(a, a)
    assert isinstance(out, torch.Tensor) and out.device.type == "cpu"
    torch.testing.assert_close(out, 2 * a)
    x = neuron(128, 16)
    torch.testing.assert_close(wrap_nki(tile_add_kernel)[4](x, x).cpu(), 2 * x.cpu())


def test_errors():
    with pytest.raises(RuntimeError, match="different devices"):
        add_kernel(neuron(4, 4), torch.randn(4, 4))
    with pytest.raises(ValueError, match="Unsupported dtype"):
        add_kernel(neuron(4, 4).double(), neuron(4, 4).double())
    with pytest.raises(nki.NkiValidationError) as e:
        add_kernel(neuron(200, 4), neuron(200, 4))   # > 128 partitions in one tile
    assert e.value.code == "err_num_partition_exceed_arch_limit"


def test_simulator_forced_returns_numpy(monkeypatch):
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    a = neuron(4, 4)
    assert isinstance(add_kernel(a, a), np.ndarray)


def test_handler_registered_by_torch_neuronx():
    import sys
    assert handler._state["installed"]
    assert any(h is handler.handle for _, h in sys.modules["nki.jit"]._handlers)


def test_import_torch_alone_routes_neuron_tensors(python_subprocess):
    """`import torch` (autoload) must be enough: no explicit torch_neuronx import."""
    r = python_subprocess("""
        import sys, time
        t = time.perf_counter()
        import torch
        dt = time.perf_counter() - t
        assert 'torch_neuronx.nki_integration' in sys.modules
        assert 'nki.simulator' not in sys.modules and 'torch_neuronx.nki_integration.op' not in sys.modules
        import nki, nki.language as nl
        @nki.jit
        def double(a):
            out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
            nl.store(out, nl.multiply(nl.load(a), 2.0))
            return out
        x = torch.ones(4, 4, device='neuron')
        y = double(x)
        assert y.device.type == 'neuron' and bool((y.cpu() == 2).all())
        import torch_neuronx
        assert torch_neuronx.nki_op is not None
        print('ok')
    """)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-3000:]
