"""torch.profiler's PrivateUse1 plumbing on neuron (csrc/profiler.cpp, part 1).

Before torch-neuronx registered PyTorch's profiler stubs, the legacy
`use_device="neuron"` path raised "PrivateUse1 used in profiler but not
enabled" twice per op and reported cpu_time_total near -7e16.
"""
from __future__ import annotations

import torch
from torch.profiler import ProfilerActivity, profile

NOT_ENABLED = "PrivateUse1 used in profiler but not enabled"


def _work():
    torch.manual_seed(0)
    a = torch.randn(32, 32, device="neuron", requires_grad=True)
    b = torch.randn(32, 32, device="neuron")
    (a @ b).relu().sum().backward()
    return a.grad


def _assert_times_sane(prof):
    averages = prof.key_averages()
    assert len(averages) > 0
    for avg in averages:
        assert avg.cpu_time_total >= 0, (avg.key, avg.cpu_time_total)
        assert avg.self_cpu_time_total >= 0, (avg.key, avg.self_cpu_time_total)
        assert avg.device_time_total >= 0, (avg.key, avg.device_time_total)
    total = sum(a.self_cpu_time_total for a in averages)
    assert 0 < total < 60e6  # microseconds: a real measurement, not a wrapped clock


def test_legacy_use_device_records_device_time_without_errors(capfd):
    _work()
    with torch.autograd.profiler.profile(use_device="neuron") as prof:
        grad = _work()
    err = capfd.readouterr().err
    assert NOT_ENABLED not in err
    _assert_times_sane(prof)
    mm = next(a for a in prof.key_averages() if a.key == "aten::mm")
    # the stubs time the op on the virtual core: the host time of the kernel
    assert 0 < mm.device_time_total <= mm.cpu_time_total * 1.01 + 1
    assert torch.equal(grad.cpu(), _work().cpu())  # profiling changed nothing


def test_kineto_privateuse1_activity_without_errors(capfd):
    _work()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        _work()
    assert NOT_ENABLED not in capfd.readouterr().err
    _assert_times_sane(prof)
    names = {a.key for a in prof.key_averages()}
    assert {"aten::mm", "aten::relu"} <= names


def test_legacy_stubs_serve_record_function_and_multiple_devices(capfd):
    with torch.autograd.profiler.profile(use_device="neuron") as prof:
        with torch.profiler.record_function("user_region"):
            x0 = torch.ones(8, device="neuron:0") * 2
            x1 = torch.ones(8, device="neuron:1") * 3
    assert NOT_ENABLED not in capfd.readouterr().err
    assert any(e.name == "user_region" for e in prof.function_events)
    assert x0.sum().item() == 16 and x1.sum().item() == 24
    _assert_times_sane(prof)
