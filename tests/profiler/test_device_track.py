"""The estimated Trainium device track (csrc/profiler.cpp part 2, torch_neuronx/profiling/).

With ProfilerActivity.PrivateUse1, every device kernel run on neuron gets a
device event whose duration is the cost model's estimate (torch_neuronx.estimate
op_estimate), linked to its CPU op, per (logical core, stream), in issue order.
"""
from __future__ import annotations

import copy
import os

import torch
from torch.profiler import ProfilerActivity, profile

from torch_neuronx.estimate import hardware, op_estimate
from torch_neuronx.profiling import _trace_file as trace_file

BOTH = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def _mm_estimate_us(m, k, n, dtype=torch.float32) -> float:
    a = torch.empty(m, k, dtype=dtype, device="meta")
    b = torch.empty(k, n, dtype=dtype, device="meta")
    est = op_estimate(torch.ops.aten.mm.default, (a, b), {}, a @ b, hardware=hardware())
    return est.seconds * 1e6


def _profile(fn, activities=BOTH):
    fn()  # warm: first-call costs stay out of the trace
    with profile(activities=activities) as prof:
        out = fn()
    return prof, out


def test_mm_device_time_is_the_cost_model_estimate():
    a = torch.randn(64, 128, device="neuron")
    b = torch.randn(128, 32, device="neuron")
    prof, _ = _profile(lambda: [a @ b for _ in range(3)])
    averages = prof.key_averages()
    mm = next(e for e in averages if e.key == "aten::mm")
    kernel = next(e for e in averages if e.key == "aten::mm [estimated]")
    assert mm.count == 3 and kernel.count == 3 and kernel.cpu_time_total == 0
    expected = 3 * _mm_estimate_us(64, 128, 32)
    assert abs(mm.device_time_total - expected) <= 0.01 * expected + 3 * 0.002  # 1 ns rounding each
    # the composite matmul holds the kernel: its device total includes mm's, it adds none itself
    matmul = next(e for e in averages if e.key == "aten::matmul")
    assert matmul.self_device_time_total == 0
    assert abs(matmul.device_time_total - mm.device_time_total) < 0.01


def test_table_shows_the_device_column_and_cpu_only_has_none():
    x = torch.randn(256, 256, device="neuron")
    prof, _ = _profile(lambda: (x @ x).softmax(-1))
    table = prof.key_averages().table(sort_by="device_time_total", row_limit=5)
    assert "NEURON TOTAL" in table.upper() and "aten::mm [estimated]" in table
    cpu_prof, _ = _profile(lambda: (x @ x).softmax(-1), activities=[ProfilerActivity.CPU])
    assert all(e.device_time_total == 0 for e in cpu_prof.key_averages())


def test_results_unchanged_by_the_device_track():
    torch.manual_seed(0)
    cpu_model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    model = copy.deepcopy(cpu_model).to("neuron")
    x = torch.randn(8, 16)
    with profile(activities=BOTH):
        got = model(x.to("neuron"))
    assert torch.equal(got.cpu(), cpu_model(x))   # the CPU kernels' bits, profiled or not


def test_chrome_trace_has_labelled_device_tracks_in_stream_order(tmp_path):
    torch.manual_seed(0)
    w = torch.randn(32, 32, device="neuron", requires_grad=True)
    x = torch.randn(16, 32, device="neuron")
    y = torch.randn(8, 8, device="neuron:1")

    def step():
        (x @ w).tanh().sum().backward()
        return y * 2

    prof, _ = _profile(step)
    path = os.path.join(tmp_path, "trace.json")
    prof.export_chrome_trace(path)
    trace = trace_file.load(path)
    kernels = trace_file.device_events(trace)
    names = trace_file.track_names(trace)
    assert {e["pid"] for e in kernels} == {0, 1}  # one track per logical core used
    for core in (0, 1):
        assert "estimated" in names[core] and f"neuron:{core}" in names[core]
    assert {"aten::mm [estimated]", "aten::tanh [estimated]", "aten::mul [estimated]"} <= {
        e["name"] for e in kernels}
    for e in kernels:
        assert e["args"]["estimate"].startswith("Trainium device time (estimated")
        assert e["dur"] > 0 and e["args"]["bound"] in ("compute", "memory", "launch")
    # stream order, by cause rather than by clock: on each (core, stream) the device events come in the
    # order their CPU ops were issued, and none starts before the one before it ends. (Comparing a device
    # event's start with its CPU op's start mixes PyTorch's TSC-based op clock with the session's wall
    # clock, which drift apart by a load-dependent amount: no slack is safe.)
    cpu_start = {e["args"].get("External id"): e["ts"] for e in trace_file.cpu_ops(trace)}
    by_stream = {}
    for e in kernels:
        linked = cpu_start.get(e["args"].get("External id"))
        assert linked is not None, f"{e['name']} has no CPU op"
        by_stream.setdefault((e["pid"], e["tid"]), []).append((linked, e))
    for events in by_stream.values():
        events.sort(key=lambda pair: pair[0])  # issue order: when the CPU op that launched each began
        for (_, before), (_, after) in zip(events, events[1:]):
            assert after["ts"] >= before["ts"] + before["dur"] - 1e-3, (before["name"], after["name"])


def test_compiled_graph_is_one_estimated_program():
    def f(a, b):
        return (a @ b).relu() * 2 + 1

    compiled = torch.compile(f, backend="neuron")
    a = torch.randn(32, 32, device="neuron")
    b = torch.randn(32, 32, device="neuron")
    prof, out = _profile(lambda: compiled(a, b))
    torch.testing.assert_close(out.cpu(), f(a.cpu(), b.cpu()))
    path = "/tmp/_neuron_compiled_trace.json"
    prof.export_chrome_trace(path)
    kernels = trace_file.device_events(trace_file.load(path))
    graphs = [e for e in kernels if e["name"].startswith("neuron graph")]
    assert len(graphs) == 1 and graphs[0]["args"]["category"] == "compiled graph"
    assert graphs[0]["name"].endswith("(forward) [estimated]")
    # the graph's own matmul is inside the program, not a second eager kernel
    assert not any(e["name"].startswith("aten::mm") for e in kernels)


def test_collective_is_an_estimated_event(tmp_path):
    import torch.distributed as dist

    dist.init_process_group("neuron", store=dist.HashStore(), rank=0, world_size=1)
    try:
        t = torch.ones(1024, device="neuron")
        prof, _ = _profile(lambda: dist.all_reduce(t))
    finally:
        dist.destroy_process_group()
    path = os.path.join(tmp_path, "trace.json")
    prof.export_chrome_trace(path)
    (event,) = [e for e in trace_file.device_events(trace_file.load(path)) if e["name"].startswith("c10d.")]
    assert event["name"] == "c10d.all_reduce [estimated]" and event["pid"] == 0
    assert event["args"]["category"] == "collective:all_reduce" and event["args"]["bytes"] == 4096
    assert event["args"]["group_size"] == 1
