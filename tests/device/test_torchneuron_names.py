"""TorchNeuron's top-level names, called as its docs call them (docs/torchneuron-names.md).

Each `torch_neuronx.<name>` is the object of its one implementation (torch.neuron or a
subpackage), and answers with real values.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

import torch_neuronx
from torch_neuronx import _public_names


@pytest.mark.parametrize("name", sorted(_public_names.DEVICE_MODULE_NAMES))
def test_device_module_names_are_torch_neuron_objects(name):
    assert getattr(torch_neuronx, name) is getattr(torch.neuron, name)


def test_other_names_are_their_implementations():
    from torch_neuronx import profiling

    assert torch_neuronx.is_neuron_runtime_initialized is torch.neuron.is_initialized
    assert torch_neuronx.memory is torch.neuron.memory
    assert torch_neuronx.NeuronConfig is profiling.NeuronConfig
    assert torch_neuronx.ProfileMode is profiling.ProfileMode
    assert torch_neuronx.NeuronProfiler is profiling.NeuronProfiler
    assert set(_public_names.names()) <= set(dir(torch_neuronx))


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'memory_alocated'"):
        torch_neuronx.memory_alocated  # noqa: B018


def test_memory_guide_calls_report_a_tensors_bytes():
    """The memory-profiling guide: synchronize, then read the statistics."""
    torch_neuronx.synchronize()
    before = torch_neuronx.memory_allocated()
    torch_neuronx.reset_peak_memory_stats()
    x = torch.empty(1 << 18, dtype=torch.float32, device="neuron")  # 1 MiB
    torch_neuronx.synchronize()
    grown = torch_neuronx.memory_allocated() - before
    assert grown == x.untyped_storage().nbytes() == 1 << 20
    stats = torch_neuronx.memory_stats()
    assert stats["allocated_bytes.all.current"] == torch_neuronx.memory_allocated()
    assert torch_neuronx.max_memory_allocated() >= before + (1 << 20)
    assert torch_neuronx.memory_reserved() >= torch_neuronx.memory_allocated()
    summary = torch_neuronx.memory_summary(device=None, abbreviated=False)
    assert "memory summary" in summary and "neuron:0" in summary
    del x
    torch_neuronx.reset_peak_memory_stats()
    assert torch_neuronx.max_memory_allocated() == torch_neuronx.memory_allocated() == before


def test_memory_snapshot_through_torch_neuronx_memory():
    torch_neuronx.memory._record_memory_history(max_entries=1000)
    try:
        x = torch.ones(1024, device="neuron")
        snapshot = torch_neuronx.memory._snapshot()
    finally:
        torch_neuronx.memory._record_memory_history(enabled=None)
    sizes = [b["size"] for seg in snapshot["segments"] for b in seg["blocks"] if b["state"] == "active_allocated"]
    assert x.untyped_storage().nbytes() in sizes, sizes


def test_device_and_stream_names():
    assert torch_neuronx.device_count() == torch.neuron.device_count() >= 1
    with torch_neuronx.device(1):
        assert torch_neuronx.current_device() == 1
        y = torch.ones(2, device="neuron")
    assert y.device == torch.device("neuron", 1)
    s = torch_neuronx.Stream()
    with torch_neuronx.stream(s):
        assert torch_neuronx.current_stream() == s
    assert torch_neuronx.get_device_properties(0).total_memory == torch.neuron.get_device_properties(0).total_memory


def test_op_tracking_names():
    torch_neuronx.clear_op_tracking()
    torch.ones(3, device="neuron").add(1)
    assert torch_neuronx.get_executed_ops().get("aten::add.Tensor", 0) >= 1
    torch_neuronx.clear_op_tracking()
    assert torch_neuronx.get_executed_ops() == {}


def test_profiler_config_as_documented(tmp_path):
    from torch.profiler import ProfilerActivity, profile

    cfg = torch_neuronx.NeuronConfig(modes=[torch_neuronx.ProfileMode.DEVICE], profile_output_dir=str(tmp_path))
    a = torch.randn(64, 64, device="neuron")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=cfg) as prof:
        (a @ a).sum().item()
    assert any(e.key == "aten::mm" for e in prof.key_averages())


def test_names_cost_nothing_at_import_torch():
    """Resolved on first use: `import torch` loads neither the profiler package nor the compile helper."""
    code = ("import sys, json, torch; torch.ones(1, device='neuron'); "
            "print(json.dumps([m for m in ('torch_neuronx.profiling', 'torch_neuronx.neuron_dynamo_backend', "
            "'torch_neuronx._public_names', 'torch._dynamo') if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out.strip().splitlines()[-1]) == []
