"""Nested recorders (estimate/recorders.py): an estimate inside an estimate, the profiler's device
track inside an estimate and around one. Each op and collective is costed once by the cost model
(the calls are counted) and its cost reaches every active recorder."""
from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

import torch_neuronx
import torch_neuronx.estimate as estimate_pkg
from torch_neuronx.estimate import collectives as collectives_mod
from torch_neuronx.estimate import _mode as mode_mod
from torch_neuronx.estimate import _ops as ops_mod
from torch_neuronx.estimate import recorders

BOTH = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


@pytest.fixture
def cost_calls(monkeypatch):
    """Counts of the cost model's op and collective estimates, wherever they are called from: the
    estimate's dispatch mode, the device track (estimate.op_estimate) and the process group."""
    calls = {"op": 0, "collective": 0}
    op, collective = mode_mod.op_estimate, collectives_mod.collective_estimate

    def counted_op(*args, **kwargs):
        calls["op"] += 1
        return op(*args, **kwargs)

    def counted_collective(*args, **kwargs):
        calls["collective"] += 1
        return collective(*args, **kwargs)

    monkeypatch.setattr(mode_mod, "op_estimate", counted_op)
    monkeypatch.setattr(estimate_pkg, "op_estimate", counted_op)
    monkeypatch.setattr(collectives_mod, "collective_estimate", counted_collective)
    return calls


def _work(a, b):
    return (a @ b).relu().sum(dim=0)


def _inputs():
    torch.manual_seed(0)
    return torch.randn(64, 128, device="neuron"), torch.randn(128, 32, device="neuron")


def _rows(est):
    return [(e.kind, e.name, e.seconds, e.launch_s, e.flops, e.bytes) for e in est.events]


def test_an_estimate_inside_an_estimate_costs_each_op_once(cost_calls):
    a, b = _inputs()
    _work(a, b)   # warm
    with torch_neuronx.estimate("trn2.3xlarge") as alone:
        expected = _work(a, b)
    per_run = cost_calls["op"]
    assert per_run >= 3 and len(alone.events) == 3   # mm, relu, sum (and any view)

    cost_calls["op"] = 0
    with torch_neuronx.estimate("trn2.3xlarge") as outer:
        _work(a, b)
        with torch_neuronx.estimate("trn2.3xlarge") as inner:
            out = _work(a, b)
        assert recorders.active() == (outer,)
    assert recorders.active() == ()
    assert cost_calls["op"] == 2 * per_run          # two runs of the work, each op costed once
    assert _rows(inner) == _rows(alone)             # the inner estimate: its own clock from zero
    assert inner.total_s == alone.total_s
    assert [e.name for e in outer.events] == 2 * [e.name for e in alone.events]
    torch.testing.assert_close(out.cpu(), expected.cpu())
    torch.testing.assert_close(out.cpu(), torch.relu(a.cpu() @ b.cpu()).sum(dim=0))


def test_nested_estimates_of_two_instances_cost_once_per_instance(cost_calls):
    a, b = _inputs()
    _work(a, b)
    with torch_neuronx.estimate("trn3.48xlarge") as trn3_alone:
        _work(a, b)
    per_run = cost_calls["op"]
    cost_calls["op"] = 0
    with torch_neuronx.estimate("trn2.3xlarge") as trn2:
        with torch_neuronx.estimate("trn3.48xlarge") as trn3:
            _work(a, b)
    assert cost_calls["op"] == 2 * per_run          # once for each distinct hardware
    assert _rows(trn3) == _rows(trn3_alone)
    assert trn2.total_s != trn3.total_s             # each got its own instance's cost


def _kernels(prof) -> dict[str, float]:
    """Device microseconds per estimated kernel name on the profiler's device track."""
    out: dict[str, float] = {}
    for e in prof.key_averages():
        if e.key.endswith("[estimated]"):
            out[e.key] = out.get(e.key, 0.0) + e.device_time_total
    return out


@pytest.mark.parametrize("track_outside", [False, True], ids=["track-inside-estimate", "estimate-inside-track"])
def test_the_device_track_and_an_estimate_share_one_costing(cost_calls, track_outside):
    a, b = _inputs()
    fn = lambda: [a @ b for _ in range(3)]   # noqa: E731 - mm only: no eager fusion in the estimate
    fn()
    with torch_neuronx.estimate() as alone:
        fn()
    per_run = cost_calls["op"]
    cost_calls["op"] = 0
    if track_outside:
        with profile(activities=BOTH) as prof:
            with torch_neuronx.estimate() as est:
                fn()
    else:
        with torch_neuronx.estimate() as est:
            with profile(activities=BOTH) as prof:
                fn()
    kernels = _kernels(prof)                        # processing the trace costs nothing more
    assert cost_calls["op"] == per_run
    assert _rows(est) == _rows(alone)
    # the device track shows the op's own cost (the estimate then overlaps launches on its stream)
    raw = ops_mod.op_estimate(torch.ops.aten.mm.default, (a, b), {}, a @ b, hardware=est.hardware)
    assert kernels["aten::mm [estimated]"] == pytest.approx(3 * raw.seconds * 1e6, abs=3 * 0.002)   # 1 ns rounding
    assert [e.name for e in est.events] == 3 * ["aten.mm"]
    assert recorders.active() == ()


def test_a_collective_reaches_every_active_recorder(cost_calls):
    dist.init_process_group("neuron", store=dist.HashStore(), rank=0, world_size=1)
    try:
        t = torch.ones(1024, device="neuron")
        dist.all_reduce(t)   # warm
        with torch_neuronx.estimate() as outer:
            with profile(activities=BOTH) as prof:
                with torch_neuronx.estimate() as inner:
                    dist.all_reduce(t)
        kernels = _kernels(prof)
    finally:
        dist.destroy_process_group()
    assert cost_calls["collective"] == 1             # costed once ...
    for est in (outer, inner):                       # ... delivered to both estimates
        (event,) = [e for e in est.events if e.kind == "collective"]
        assert event.name == "c10d.all_reduce" and event.bytes == 4096
    assert "c10d.all_reduce [estimated]" in kernels  # ... and to the device track
    assert torch.equal(t.cpu(), torch.ones(1024))


def test_a_trace_may_end_after_the_estimate_it_started_in(cost_calls):
    a, b = _inputs()
    a @ b
    prof = profile(activities=BOTH)
    with torch_neuronx.estimate() as est:
        with pytest.raises(RuntimeError, match="already recording"):
            recorders.push(est)
        prof.start()
        a @ b
        assert len(recorders.active()) == 2
    assert len(recorders.active()) == 1              # the device track's recorder, still recording
    a @ b                                            # costed by the device track alone
    prof.stop()
    assert recorders.active() == ()
    assert cost_calls["op"] == 2 and [e.name for e in est.events] == ["aten.mm"]
    assert prof.key_averages() and _kernels(prof)["aten::mm [estimated]"] > 0
    assert cost_calls["op"] == 2
