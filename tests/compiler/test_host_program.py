"""Compiled graphs as host programs (torch_neuronx/compiler/host_program.py, csrc/host_program.cpp):
the program runs on host views of its core's memory, its results are neuron tensors over the same
bytes, device memory is counted as before, and graphs that cannot run that way keep the neuron
program."""
from __future__ import annotations

import pytest
import torch
from torch._inductor.utils import run_and_get_code

from torch_neuronx import _C
from torch_neuronx.compiler import host_program

FOOTER = "_C._host_program(call, "


def _compile(fn, *args):
    torch._dynamo.reset()
    out, code = run_and_get_code(torch.compile(fn, backend="neuron", dynamic=False), *args)
    return out, "\n".join(code)


def test_outputs_are_neuron_views_of_inputs_and_buffers():
    def f(x, w):
        x.add_(1)                         # an input mutated in place
        y = x @ w                         # an extern matmul into a buffer
        return y.relu(), x[1:], y.t()     # a buffer, a view of an input, a view of a buffer

    x, w = torch.randn(4, 8), torch.randn(8, 8)
    xn, wn = x.neuron(), w.neuron()
    (a, b, c), code = _compile(f, xn, wn)
    assert FOOTER in code
    ra, rb, rc = f(x.clone(), w)
    for got, ref in ((a, ra), (b, rb), (c, rc)):
        assert got.device.type == "neuron" and torch.equal(got.cpu(), ref)
    assert torch.equal(xn.cpu(), x + 1)                           # the mutation reached the neuron input
    assert b.untyped_storage().data_ptr() == xn.untyped_storage().data_ptr()   # still a view of it
    b.fill_(5.0)
    assert xn.cpu()[1:].eq(5.0).all()


def test_buffers_and_results_are_counted_device_memory():
    def f(x):
        return (x @ x).sin() @ x

    x = torch.randn(256, 256, device="neuron")
    f_c = torch.compile(f, backend="neuron", dynamic=False)
    f_c(x)
    torch.neuron.reset_peak_memory_stats()
    base = torch.neuron.memory_allocated()
    out = f_c(x)
    assert torch.neuron.memory_allocated() - base == 256 * 256 * 4          # the result
    assert torch.neuron.max_memory_allocated() - base >= 2 * 256 * 256 * 4  # a buffer and the result at once
    del out
    assert torch.neuron.memory_allocated() == base


def test_training_through_host_programs_matches_cpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    twin = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    twin.load_state_dict(model.state_dict())
    twin.neuron()
    x = torch.randn(8, 16)
    torch._dynamo.reset()
    compiled = torch.compile(twin, backend="neuron", dynamic=False)
    compiled(x.neuron()).pow(2).mean().backward()
    model(x).pow(2).mean().backward()
    for p, q in zip(twin.parameters(), model.parameters()):
        assert p.grad.device.type == "neuron"
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-5, atol=1e-6)


def test_graphs_that_cannot_run_on_the_host_keep_the_neuron_program(monkeypatch):
    x = torch.randn(4, 4, device="neuron")
    _, code = _compile(lambda t: t * torch.rand_like(t), x)        # seeds made on a named device
    assert FOOTER not in code and "empty_strided_neuron(" in code
    _, code = _compile(lambda t, c: (t + 1, c * 2), x, torch.randn(3))   # a CPU tensor in and out
    assert FOOTER not in code

    def overrideable(q):   # SDPA's backend hook: no CPU kernel behind it
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.OVERRIDEABLE):
            return torch.nn.functional.scaled_dot_product_attention(q, q, q)

    q = torch.randn(1, 2, 8, 16)
    out, code = _compile(overrideable, q.neuron())
    assert FOOTER not in code
    torch.testing.assert_close(out.cpu(), torch.nn.functional.scaled_dot_product_attention(q, q, q))
    monkeypatch.setenv(host_program.ENV, "0")
    out, code = _compile(lambda t: (t @ t).relu(), x)
    assert FOOTER not in code and torch.equal(out.cpu(), (x.cpu() @ x.cpu()).relu())
    monkeypatch.setenv(host_program.ENV, "sometimes")
    with pytest.raises(ValueError, match=host_program.ENV):
        host_program.enabled()


def test_the_host_program_call_converts_once_and_cleans_up_after_errors():
    x = torch.arange(6.0, device="neuron")
    seen = {}

    def program(args):
        (a,) = args
        args.clear()
        seen["input"] = (a.device.type, a.untyped_storage().data_ptr())
        return a * 2, torch.ones(3), 7          # a CPU kernel's result, a CPU tensor kept CPU, an int

    run = _C._host_program(program, 0, (True, False, False))
    base = torch.neuron.memory_allocated(0)
    doubled, ones, seven = run([x])
    assert seen["input"] == ("cpu", x.untyped_storage().data_ptr())     # a host view, no copy
    assert doubled.device.type == "neuron" and doubled.cpu().tolist() == [0, 2, 4, 6, 8, 10]
    assert ones.device.type == "cpu" and seven == 7
    assert torch.neuron.memory_allocated(0) - base == 256   # the adopted result counts (its 256 B block)

    def failing(args):
        raise ZeroDivisionError("inside the program")

    with pytest.raises(ZeroDivisionError, match="inside the program"):
        _C._host_program(failing, 0, ())([x])
    before = torch.neuron.memory_stats(0)["allocation.all.current"]
    cpu = torch.ones(1000)                       # the host-kernel core was reset: plain CPU memory
    assert torch.neuron.memory_stats(0)["allocation.all.current"] == before and cpu.sum() == 1000
    with pytest.raises(TypeError, match="takes 3 arguments"):
        _C._host_program(program, 0)
    with pytest.raises(TypeError, match="callable"):
        _C._host_program(5, 0, ())
    with pytest.raises(RuntimeError, match="neuron:99|ordinal"):
        _C._host_program(program, 99, ())
    with pytest.raises(TypeError, match="one list"):
        run((x,))


def test_host_buffers_are_counted_blocks_of_their_core():
    base = torch.neuron.memory_allocated(1)
    b = _C._empty_strided_host((8, 16), (16, 1), torch.float32, 1)
    assert b.device.type == "cpu" and b.shape == (8, 16) and b.stride() == (16, 1) and b.dtype == torch.float32
    assert torch.neuron.memory_allocated(1) - base == 512
    b.fill_(2.0)
    assert b.sum().item() == 256.0
    del b
    assert torch.neuron.memory_allocated(1) == base
    with pytest.raises(TypeError, match="_empty_strided_host.*takes 4 arguments, got 3"):
        _C._empty_strided_host((4,), (1,), torch.float32)
    with pytest.raises(TypeError, match="dtype must be a torch.dtype"):
        _C._empty_strided_host((4,), (1,), "float32", 0)
    with pytest.raises(RuntimeError, match="differ in length"):
        _C._empty_strided_host((4, 4), (1,), torch.float32, 0)
    with pytest.raises(RuntimeError, match="negative"):
        _C._empty_strided_host((-1,), (1,), torch.float32, 0)
    assert torch.neuron.memory_allocated(1) == base
