"""Every graph the neuron backend produces is recorded with what made it new: its first call, a new
input shape, a guard failure on the same shapes, or the code after a graph break."""
from __future__ import annotations

import torch

from torch_neuronx.compiler import _compile_log as compile_log   # the compiler's record of each graph

from .conftest import elementwise


def _new_records(start):
    return compile_log.records(start)


def test_a_known_set_of_shapes_compiles_exactly_those_graphs():
    start = compile_log.count()
    f = torch.compile(elementwise, backend="neuron", dynamic=False)
    for n in (8, 16, 8, 24, 16):
        x = torch.ones(n, 4, device="neuron")
        f(x, x)
    recs = _new_records(start)
    assert [r.inputs[0][0] for r in recs] == [(8, 4), (16, 4), (24, 4)]   # a repeated shape compiles nothing
    assert [r.cause for r in recs] == ["first call", "new shape", "new shape"]
    assert recs[1].detail == "input 0 shape (8, 4) -> (16, 4)"
    assert recs[2].detail == "input 0 shape (16, 4) -> (24, 4)"   # against the last graph compiled
    assert all(r.function.startswith("elementwise") and r.fx_nodes == 4 and r.rank == 0 for r in recs)
    assert len({r.key for r in recs}) == 3


def test_a_graph_break_and_a_guard_failure_are_named():
    def broken(x):
        y = x * 2
        print("a graph break")
        return y + 1

    def scaled(x, k: int):
        return x * k

    start = compile_log.count()
    x = torch.ones(4, device="neuron")
    torch.compile(broken, backend="neuron", dynamic=False)(x)
    g = torch.compile(scaled, backend="neuron", dynamic=False)
    g(x, 2)
    g(x, 3)   # same shapes, another Python int: Dynamo's guard on k fails
    recs = _new_records(start)
    assert [r.cause for r in recs] == ["first call", "graph break", "first call", "guard failure"]
    assert "broken" in recs[1].detail
    assert recs[3].inputs == recs[2].inputs and "k" in recs[3].detail


def test_flops_are_counted_only_when_wanted():
    def mm(a, b):
        return a @ b

    start = compile_log.count()
    a = torch.ones(8, 16, device="neuron")
    b = torch.ones(16, 4, device="neuron")
    torch.compile(mm, backend="neuron", dynamic=False)(a, b)
    compile_log.set_detail("test", True)
    try:
        torch.compile(mm, backend="neuron", dynamic=False)(a, torch.ones(16, 2, device="neuron"))
    finally:
        compile_log.set_detail("test", False)
    off, on = _new_records(start)
    assert off.flops is None
    assert on.flops == 2 * 8 * 16 * 2   # torch.utils.flop_counter's count of the matmul


def test_every_compile_after_a_reset_is_a_first_call():
    """Frame ids start again after torch._dynamo.reset(), and a new compile's context object may take a
    freed one's address: neither makes a first call look like the code after a graph break."""
    import gc

    import torch._dynamo

    causes = []
    for _ in range(20):
        torch._dynamo.reset()
        gc.collect()
        start = compile_log.count()
        torch.compile(elementwise, backend="neuron", dynamic=False)(torch.ones(8, 4, device="neuron"),
                                                                    torch.ones(8, 4, device="neuron"))
        causes += [r.cause for r in _new_records(start)]
    assert causes == ["first call"] * 20
