"""Compiled graphs as host programs (torch_neuronx/compiler/_host_program.py, csrc/host_program.cpp):
the program runs on host views of its core's memory, its results are neuron tensors over the same
bytes, device memory is counted as before, and graphs that cannot run that way keep the neuron
program."""
from __future__ import annotations

import gc

import pytest
import torch
from torch._inductor.utils import run_and_get_code

from torch_neuronx import _C
from torch_neuronx.compiler import _host_program as host_program

FOOTER = "_C._host_program(call, "
BLOCK = 256   # the allocator's smallest block: what each small tensor below holds


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


def _alias_ids(program_body=None):
    """A host program that doubles its one input and records the CPU alias it was given."""
    seen = []

    def program(args):
        (a,) = args
        args.clear()
        seen.append((id(a), a.device.type, a.data_ptr()))    # (a Python storage object would pin the alias)
        if program_body is not None:
            program_body(a)
        return (a * 2,)

    return _C._host_program(program, 0, (True,)), seen


def test_held_inputs_keep_their_alias_across_calls_without_keeping_device_memory():
    run, seen = _alias_ids()
    w = torch.arange(4.0, device="neuron")            # held outside the argument list, as a weight is
    for _ in range(3):
        (out,) = run([w])
        assert out.cpu().tolist() == [0.0, 2.0, 4.0, 6.0]
    assert len({s[0] for s in seen}) == 1                          # one alias object, made once
    assert all(s[1:] == ("cpu", w.data_ptr()) for s in seen)
    del out
    base = torch.neuron.memory_allocated(0)
    del w                                                           # the cached alias does not own it
    assert torch.neuron.memory_allocated(0) == base - BLOCK
    w2 = torch.arange(8.0, device="neuron")[2:6]                    # other bytes, other geometry
    (out,) = run([w2])
    assert out.cpu().tolist() == [4.0, 6.0, 8.0, 10.0]
    assert seen[-1][2] == w2.data_ptr()


def test_an_input_alias_kept_by_the_program_owns_the_bytes():
    kept = []
    run, seen = _alias_ids(kept.append)
    w = torch.arange(4.0, device="neuron")
    run([w])
    run([w])                                     # the kept alias is not lent out again
    assert seen[0][0] != seen[1][0]
    base = torch.neuron.memory_allocated(0)
    del w
    assert torch.neuron.memory_allocated(0) == base          # the kept aliases keep the block alive
    assert kept[0].tolist() == [0.0, 1.0, 2.0, 3.0] and kept[1].tolist() == [0.0, 1.0, 2.0, 3.0]
    kept.clear()
    assert torch.neuron.memory_allocated(0) == base - BLOCK


def test_outputs_over_a_held_input_are_views_of_it():
    def program(args):
        (a,) = args
        args.clear()
        return a, a[1:], a + 1

    run = _C._host_program(program, 0, (True, True, True))
    w = torch.arange(4.0, device="neuron")
    for _ in range(2):
        same, tail, plus = run([w])
        assert same.device.type == tail.device.type == plus.device.type == "neuron"
        assert same.untyped_storage().data_ptr() == tail.untyped_storage().data_ptr() == w.untyped_storage().data_ptr()
        assert plus.cpu().tolist() == [1.0, 2.0, 3.0, 4.0]
    tail.fill_(9.0)
    assert w.cpu().tolist() == [0.0, 9.0, 9.0, 9.0]
    base = torch.neuron.memory_allocated(0)
    del w, same
    assert torch.neuron.memory_allocated(0) == base            # `tail` still holds the block
    del tail
    assert torch.neuron.memory_allocated(0) == base - BLOCK


def test_held_inputs_mutated_in_place_under_and_outside_inference_mode():
    def bump(a):
        a.add_(1)                                  # a program that mutates its input (as Inductor's do)

    run, _ = _alias_ids(bump)
    w = torch.zeros(3, device="neuron")
    with torch.inference_mode():
        run([w])
    run([w])                                       # an alias made under inference mode is not reused here
    with torch.inference_mode():
        run([w])
    assert w.cpu().tolist() == [3.0, 3.0, 3.0]


def test_an_input_only_the_list_holds_is_freed_when_the_program_drops_it():
    inside = {}

    def program(args):
        args.clear()
        inside["allocated"] = torch.neuron.memory_allocated(0)
        return ()

    run = _C._host_program(program, 0, ())
    gc.collect()   # garbage of earlier tests, freed during the call, would move the count
    base = torch.neuron.memory_allocated(0)
    run([torch.ones(1024, device="neuron")])
    assert inside["allocated"] == base and torch.neuron.memory_allocated(0) == base


def test_a_failing_program_leaves_its_inputs_intact():
    def failing(args):
        (a,) = args
        a.add_(1)
        raise ValueError("inside")

    run = _C._host_program(failing, 0, ())
    w = torch.zeros(2, device="neuron")
    for _ in range(2):
        with pytest.raises(ValueError, match="inside"):
            run([w])
    assert w.cpu().tolist() == [2.0, 2.0]
    base = torch.neuron.memory_allocated(0)
    del w
    assert torch.neuron.memory_allocated(0) == base - BLOCK


def _disable_wrappers_per_call(fn, *args):
    import sys

    calls = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_name == "_fn" and frame.f_code.co_filename.endswith("eval_frame.py"):
            calls.append(frame.f_code)

    fn(*args)
    sys.setprofile(profile)
    try:
        fn(*args)
    finally:
        sys.setprofile(None)
    return len(calls)


def test_a_compiled_neuron_graph_is_called_through_as_many_dynamo_wrappers_as_inductors():
    def f(x):
        return (x @ x).relu()

    x = torch.randn(8, 8)
    torch._dynamo.reset()
    on_cpu = _disable_wrappers_per_call(torch.compile(f, backend="inductor", dynamic=False), x)
    torch._dynamo.reset()
    on_neuron = _disable_wrappers_per_call(torch.compile(f, backend="neuron", dynamic=False), x.neuron())
    assert on_neuron == on_cpu
