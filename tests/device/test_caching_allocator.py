"""The caching allocator: pools, size classes, reuse, empty_cache, HBM on reserved bytes, OOM text."""
from __future__ import annotations

import gc

import pytest
import torch

from tests.conftest import run_python

DEV = 2


def _stats():
    return torch.neuron.memory_stats(DEV)


def test_size_classes_pools_and_reuse():
    gc.collect()
    torch.neuron.empty_cache()
    base_alloc = torch.neuron.memory_allocated(DEV)
    base_requested = _stats()["requested_bytes.all.current"]
    x = torch.empty(1000, dtype=torch.uint8, device=f"neuron:{DEV}")     # small pool, rounded to 1024
    s = _stats()
    assert s["allocated_bytes.small_pool.current"] >= 1024 and s["reserved_bytes.small_pool.current"] >= 2 << 20
    assert torch.neuron.memory_allocated(DEV) == base_alloc + 1024
    assert s["requested_bytes.all.current"] == base_requested + 1000
    y = torch.empty(3 << 20, dtype=torch.uint8, device=f"neuron:{DEV}")  # large pool, 20 MiB segment
    assert _stats()["reserved_bytes.large_pool.current"] >= 20 << 20
    ptr = y.data_ptr()
    reserved = torch.neuron.memory_reserved(DEV)
    del y
    assert torch.neuron.memory_reserved(DEV) == reserved          # cached, not returned
    y2 = torch.empty(3 << 20, dtype=torch.uint8, device=f"neuron:{DEV}")
    assert y2.data_ptr() == ptr and torch.neuron.memory_reserved(DEV) == reserved  # reused
    s = _stats()
    assert s["reserved_bytes.all.current"] >= s["allocated_bytes.all.current"] == s["active_bytes.all.current"]
    del x, y2
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved(DEV) == torch.neuron.memory_allocated(DEV) == base_alloc


def test_host_kernel_outputs_come_from_the_cache():
    a = torch.randn(64, 64, device=f"neuron:{DEV}")
    b = a * 2
    del b
    before = _stats()["num_device_alloc"]
    for _ in range(20):
        b = (a * 2).relu()          # host kernels; each output reuses a cached block
    assert _stats()["num_device_alloc"] == before
    assert torch.equal(b.cpu(), (a.cpu() * 2).relu())


def test_oom_counts_reserved_bytes_and_names_cached_memory():
    r = run_python("""
        import torch
        keep = []
        small = [torch.empty(1000, dtype=torch.uint8, device="neuron") for _ in range(4)]
        big = torch.empty(40 << 20, dtype=torch.uint8, device="neuron")
        del big                                   # cached: reserved stays 40 MiB + 2 MiB
        print(torch.neuron.memory_reserved() >= 42 << 20)
        other = torch.empty(50 << 20, dtype=torch.uint8, device="neuron")  # fits only after the cache returns
        s = torch.neuron.memory_stats()
        print(s["num_alloc_retries"], s["num_ooms"])
        try:
            torch.empty(20 << 20, dtype=torch.uint8, device="neuron")
        except torch.OutOfMemoryError as e:
            msg = str(e)
            print("OOM", "free but cached" in msg, "reserved by the caching allocator" in msg,
                  "empty_cache()" in msg, "TORCH_NEURONX_HBM_BYTES_PER_CORE" in msg)
        print(small[0].device, other.shape[0] == 50 << 20)
    """, env={"TORCH_NEURONX_HBM_BYTES_PER_CORE": "64MiB"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:4] == ["True", "1 0", "OOM True True True True", "neuron:0 True"]


def test_cache_limit_and_no_caching_switch(monkeypatch):
    r = run_python("""
        import torch
        x = torch.empty(30 << 20, dtype=torch.uint8, device="neuron")
        del x
        print(torch.neuron.memory_reserved())
    """, env={"TORCH_NEURONX_ALLOCATOR_CACHE_LIMIT": "0"})
    assert r.returncode == 0 and r.stdout.strip() == "0", r.stderr
    r = run_python("""
        import torch
        x = torch.empty(1000, dtype=torch.uint8, device="neuron")
        print(torch.neuron.memory_allocated(), torch.neuron.memory_reserved())
        y = x + 1
        del x, y
        print(torch.neuron.memory_reserved())
    """, env={"TORCH_NEURONX_NO_MEMORY_CACHING": "1"})
    assert r.returncode == 0 and r.stdout.split() == ["1000", "1000", "0"], r.stderr
    from torch_neuronx.runtime import env  # parsed at runtime start, by this function

    monkeypatch.setenv("TORCH_NEURONX_ALLOCATOR_CACHE_LIMIT", "x")
    with pytest.raises(env.NeuronEnvironmentError, match="TORCH_NEURONX_ALLOCATOR_CACHE_LIMIT"):
        env.parse_cache_limit(env.ALLOCATOR_CACHE_LIMIT)


def test_blocks_cross_the_history_switch_with_exact_statistics():
    """Allocation and free take a short path when no memory history is recorded and the general
    one otherwise: a block allocated under one and freed under the other keeps every statistic
    exact, and the trace records what happened while it recorded."""
    gc.collect()
    torch.neuron.empty_cache()
    keys = ("allocated_bytes.all.current", "active_bytes.all.current", "requested_bytes.all.current",
            "allocation.all.current", "inactive_split.all.current", "inactive_split_bytes.all.current")
    base = {k: _stats()[k] for k in keys}
    base_reserved = torch.neuron.memory_reserved(DEV)
    plain = [torch.empty(n, dtype=torch.uint8, device=f"neuron:{DEV}") for n in (700, 3000, 5 << 20)]
    torch.neuron.memory._record_memory_history(max_entries=100, stacks="python")
    try:
        recorded = [torch.empty(n, dtype=torch.uint8, device=f"neuron:{DEV}") for n in (900, 4000)]
        s = _stats()
        assert s["requested_bytes.all.current"] - base["requested_bytes.all.current"] == \
            700 + 3000 + (5 << 20) + 900 + 4000
        assert s["allocation.all.current"] - base["allocation.all.current"] == 5
        freed = plain.pop(0).data_ptr()        # allocated unrecorded, freed while recording
        snap = torch.neuron.memory._snapshot()
    finally:
        torch.neuron.memory._record_memory_history(enabled=None)
    trace = snap["device_traces"][DEV]
    assert [e["action"] for e in trace if e["action"] in ("alloc", "free_completed")] == \
        ["alloc", "alloc", "free_completed"]
    assert trace[-1]["addr"] == freed
    del recorded, plain                        # allocated while recording, freed unrecorded
    assert {k: _stats()[k] for k in keys} == base
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved(DEV) == base_reserved


def test_factories_on_another_core_leave_the_current_core_alone():
    """Factories (and compiled graphs' buffers) allocate on the core they name without
    making it current, and count on that core only."""
    from torch_neuronx import _C

    torch.neuron.set_device(0)
    before = {d: torch.neuron.memory_allocated(d) for d in (0, DEV)}
    a = torch.empty(1024, device=f"neuron:{DEV}")
    b = _C._empty_strided_neuron((16, 16), (16, 1), torch.float32, DEV)
    assert a.device.index == b.device.index == DEV and torch.neuron.current_device() == 0
    assert torch.neuron.memory_allocated(0) == before[0]
    assert torch.neuron.memory_allocated(DEV) == before[DEV] + 4096 + 1024
    with pytest.raises(RuntimeError, match="neuron:9"):
        _C._empty_strided_neuron((4,), (1,), torch.float32, 9)
    assert torch.neuron.current_device() == 0


def test_segments_start_on_a_page():
    # Large blocks then start on a page as on a device (a decode step's GEMV over weights at page
    # offset 64 ran ~1% slower); a tensor of its own segment starts at the segment's start.
    t = torch.empty(3 << 20, device="neuron")    # 12 MiB: a segment of its own
    assert t.data_ptr() % 4096 == 0
    segments = torch.neuron.memory._snapshot()["segments"]
    assert any(s["address"] == t.data_ptr() for s in segments)
    assert all(s["address"] % 4096 == 0 for s in segments)
