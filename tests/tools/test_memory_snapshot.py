"""Memory snapshots in PyTorch's format, opened by torch.cuda._memory_viz."""
from __future__ import annotations

import pickle

import pytest
import torch
from torch.cuda import _memory_viz

from tests.conftest import run_python


def _allocate_here():
    return torch.empty(3000, device="neuron"), torch.empty(5 << 20, dtype=torch.uint8, device="neuron")


def test_snapshot_has_segments_blocks_stacks_and_trace(tmp_path):
    torch.neuron.memory._record_memory_history(max_entries=1000, stacks="python")  # "all" adds slow C++ unwinding
    try:
        small, large = _allocate_here()
        (small + 1).sum()
        del small
        snap = torch.neuron.memory._snapshot()
        path = tmp_path / "snap.pickle"
        torch.neuron.memory._dump_snapshot(str(path))
    finally:
        torch.neuron.memory._record_memory_history(enabled=None)
    seg = next(s for s in snap["segments"] if any(b["address"] == large.data_ptr() for b in s["blocks"]))
    assert seg["segment_type"] == "large" and seg["total_size"] >= 5 << 20
    block = next(b for b in seg["blocks"] if b["address"] == large.data_ptr())
    assert block["state"] == "active_allocated" and block["requested_size"] == 5 << 20
    assert any(f["name"] == "_allocate_here" and f["filename"].endswith("test_memory_snapshot.py")
               for f in block["frames"])
    trace = snap["device_traces"][0]
    actions = [e["action"] for e in trace]
    assert "alloc" in actions and "free_completed" in actions
    assert any(e["action"] == "alloc" and e["size"] >= 12000 and e["frames"] for e in trace)
    assert len(snap["device_traces"]) == torch.neuron.device_count()
    with open(path, "rb") as f:
        loaded = pickle.load(f)
    assert set(loaded) >= {"segments", "device_traces"}
    html = _memory_viz.trace_plot(loaded)  # PyTorch's own viewer, as for a CUDA snapshot
    assert "<html" in html.lower() or "<!doctype" in html.lower()
    assert "<html" in _memory_viz.segment_plot(loaded).lower()


def test_dump_without_history_says_how_to_start(tmp_path):
    with pytest.raises(RuntimeError, match=r"_record_memory_history\(\)"):
        torch.neuron.memory._dump_snapshot(str(tmp_path / "x.pickle"))
    assert not (tmp_path / "x.pickle").exists()
    with pytest.warns(UserWarning, match="_record_memory_history"):
        torch.neuron.memory._snapshot()
    with pytest.raises(ValueError, match="enabled="):
        torch.neuron.memory._record_memory_history(enabled="sometimes")
    with pytest.raises(ValueError, match="max_entries="):
        torch.neuron.memory._record_memory_history(max_entries=0)


def test_memory_summary_shows_cached_memory():
    # relative to what earlier tests in this process still hold on the core (a worker runs many)
    torch.neuron.empty_cache()
    allocated, reserved = torch.neuron.memory_allocated(3), torch.neuron.memory_reserved(3)
    x = torch.empty(4 << 20, dtype=torch.uint8, device="neuron:3")
    del x
    text = torch.neuron.memory_summary(3)
    assert "Non-releasable memory" in text and "Free but cached" in text
    assert torch.neuron.memory_reserved(3) - reserved >= 4 << 20       # the freed block stays cached
    assert torch.neuron.memory_allocated(3) == allocated
    torch.neuron.empty_cache()
    assert (torch.neuron.memory_allocated(3), torch.neuron.memory_reserved(3)) == (allocated, reserved)


def test_launch_blocking_accepted_and_validated(monkeypatch):
    r = run_python("""
        import torch
        x = torch.ones(4, device="neuron") * 2
        torch.neuron.synchronize()
        print(torch.neuron.memory_allocated() > 0, x.sum().item())
    """, env={"NEURON_LAUNCH_BLOCKING": "1"})
    assert r.returncode == 0 and r.stdout.split() == ["True", "8.0"], r.stderr
    from torch_neuronx.runtime import env  # the value is parsed at runtime start, by this function

    monkeypatch.setenv("NEURON_LAUNCH_BLOCKING", "maybe")
    with pytest.raises(env.NeuronEnvironmentError, match="NEURON_LAUNCH_BLOCKING='maybe'"):
        env.parse_flag(env.LAUNCH_BLOCKING)
