"""TorchNeuron's `torch_neuronx.profiling` names on the virtual core (profiling/_config.py)."""
from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from torch_neuronx.profiling import NeuronConfig, NeuronProfiler, ProfileMode, _trace_file as trace_file


def test_modes_without_meaning_say_so_instead_of_failing():
    with pytest.warns(UserWarning, match="RUNTIME has no meaning on the virtual NeuronCore"):
        cfg = NeuronConfig()  # TorchNeuron's default: DEVICE and RUNTIME
    assert cfg.modes == [ProfileMode.DEVICE, ProfileMode.RUNTIME] and cfg.device_track
    for mode in (ProfileMode.CPU_UTIL, ProfileMode.HOST_MEMORY):
        with pytest.warns(UserWarning, match=f"{mode.name} has no meaning"):
            NeuronConfig(modes=[mode])


def test_bad_options_name_the_argument():
    with pytest.raises(TypeError, match="modes=.*ProfileMode.DEVICE"):
        NeuronConfig(modes=["device"])
    with pytest.raises(ValueError, match="capture_enabled_for_nc='0,x'"):
        NeuronConfig(modes=[ProfileMode.DEVICE], capture_enabled_for_nc="0,x")
    with pytest.raises(ValueError, match="max_events_per_nc=0"):
        NeuronConfig(modes=[ProfileMode.DEVICE], max_events_per_nc=0)


def test_torchneuron_usage_writes_a_trace_with_the_selected_cores(tmp_path):
    cfg = NeuronConfig(modes=[ProfileMode.DEVICE], capture_enabled_for_nc="1",
                       max_events_per_nc=2, profile_output_dir=str(tmp_path))
    assert cfg.cores == frozenset({1})
    exporter = NeuronProfiler(cfg)
    a = torch.randn(16, 16, device="neuron:0")
    b = torch.randn(16, 16, device="neuron:1")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                 experimental_config=cfg, on_trace_ready=exporter.export_trace):
        for _ in range(4):
            a @ a
            b @ b
        torch.neuron.synchronize()
    (path,) = exporter.written
    trace = trace_file.load(path)
    kernels = trace_file.device_events(trace)
    assert {e["pid"] for e in kernels} == {1} and len(kernels) == 2
    assert any(e["name"] == "aten::mm" for e in trace_file.cpu_ops(trace))


def test_core_ranges_parse():
    cfg = NeuronConfig(modes=[ProfileMode.DEVICE], capture_enabled_for_nc="0,2-4")
    assert cfg.cores == frozenset({0, 2, 3, 4})
