"""The per-process stats registry: live entries, dead and corrupt ones skipped, removed at exit."""
from __future__ import annotations

import os
import signal
import struct

import torch

from torch_neuronx.tools.api import registry
from torch_neuronx.tools.api.collector import rates

from .conftest import launch_worker, samples_around_work, stop_worker, wait_ready


def test_worker_publishes_memory_ops_and_busy_time(worker, runtime_dir):
    entries = {e.pid: e for e in registry.list_processes(runtime_dir)}
    assert worker.pid in entries
    e = entries[worker.pid]
    assert sorted(e.devices) == [0, 1]
    assert e.meta["cores"][:2] == [0, 1] and e.runtime_version.startswith("torch-neuronx")
    # neuron:1 holds exactly one 1 MiB tensor (a size-class boundary, large pool, own 20 MiB segment)
    assert e.devices[1]["allocated"] == 1 << 20
    assert e.devices[1]["reserved"] >= e.devices[1]["allocated"]
    assert e.devices[0]["allocated"] >= 256 * 256 * 4
    assert e.devices[0]["ops"] > 0 and e.devices[0]["busy_ns"] > 0
    before, after = samples_around_work(runtime_dir, worker.pid)
    rate = next(r for r in rates(before, after) if r.entry.pid == worker.pid)
    core0 = next(c for c in rate.cores if c.local == 0)
    assert core0.ops > 0 and 0 < core0.utilization <= 100


def test_normal_exit_removes_the_page_and_crash_is_ignored(tmp_path):
    proc, crashed = launch_worker(tmp_path), launch_worker(tmp_path)  # started together: one startup's wait
    wait_ready(proc), wait_ready(crashed)
    page = tmp_path / f"{proc.pid}.stats"
    assert page.exists()
    stop_worker(proc)
    assert proc.returncode == 0 and not page.exists()
    os.kill(crashed.pid, signal.SIGKILL)
    crashed.wait()
    assert (tmp_path / f"{crashed.pid}.stats").exists()  # left behind ...
    assert registry.list_processes(tmp_path) == []        # ... but not listed


def test_corrupt_and_foreign_entries_are_skipped(tmp_path):
    (tmp_path / "123.stats").write_bytes(b"garbage")
    page = bytearray(registry.PAGE_BYTES)
    struct.pack_into("<QIIq", page, 0, registry.MAGIC, registry.VERSION, 128, os.getpid())
    page[registry.META_OFFSET:registry.META_OFFSET + 5] = b"{bad "
    (tmp_path / "456.stats").write_bytes(bytes(page))
    # a well-formed page whose pid is alive but started at another time (pid reuse)
    meta = b'{"pid": %d, "start_ticks": 1, "cores": [0]}' % os.getpid()
    page[registry.META_OFFSET:registry.META_OFFSET + len(meta) + 1] = meta + b"\0"
    (tmp_path / "789.stats").write_bytes(bytes(page))
    assert registry.list_processes(tmp_path) == []
    assert registry.list_processes(tmp_path / "missing") == []


def test_this_process_page_matches_torch_neuron_stats():
    x = torch.ones(1000, device="neuron")
    path = torch.neuron.memory  # noqa: F841  (device in use)
    from torch_neuronx import _C

    page = _C._stats_page_path()
    assert page, "the process used a core, so its page exists"
    entry = registry.read_entry(registry.Path(page))
    assert entry is not None and entry.pid == os.getpid()
    assert entry.devices[0]["allocated"] == torch.neuron.memory_allocated(0)
    assert entry.devices[0]["reserved"] == torch.neuron.memory_reserved(0)
    del x


def test_compiled_graphs_and_estimated_flops_reach_the_page():
    """neuron-top's graph counts and TFLOPS: compiled-graph calls and, with estimates on,
    the cost model's FLOPs are added to this process's own page."""
    from pathlib import Path

    import torch_neuronx
    from torch_neuronx import _C

    from torch_neuronx.estimate._graphs import observe  # what the neuron backend returns for every graph

    x = torch.randn(16, 16, device="neuron")
    gm = torch.fx.symbolic_trace(lambda t: (t @ t).relu())
    f = observe(gm, gm, "tiny")   # a real compile would cost ~10 s here: the wrapper is what counts
    f(x)
    folder = Path(_C._stats_page_path()).parent

    def own() -> dict:
        return next(e for e in registry.list_processes(folder) if e.pid == os.getpid()).devices[0]

    before = own()
    for _ in range(3):
        f(x)
    middle = own()
    assert middle["graphs"] - before["graphs"] == 3
    assert middle["estimated_flops"] == before["estimated_flops"]   # estimates off: nothing added
    with torch_neuronx.estimate() as est:
        y = x @ x
    after = own()
    flops = est.flops
    assert flops >= 2 * 16 ** 3 and after["estimated_flops"] - middle["estimated_flops"] == flops
    assert torch.equal(y.cpu(), x.cpu() @ x.cpu())


def test_stats_add_rejects_bad_arguments_and_leaves_the_page_alone():
    """_stats_add is a raw C function (compiled graphs call it every time): wrong arity, a
    non-integer and an out-of-range core or field are clear Python errors, and nothing is added."""
    from pathlib import Path

    import pytest

    from torch_neuronx import _C

    torch.ones(1, device="neuron")   # the page exists once the runtime started
    folder = Path(_C._stats_page_path()).parent

    def own() -> dict:
        return next(e for e in registry.list_processes(folder) if e.pid == os.getpid()).devices[0]

    field = registry.FIELD_INDEX["graphs"]
    before = own()["graphs"]
    with pytest.raises(TypeError, match="takes 3 arguments, got 2"):
        _C._stats_add(0, field)
    with pytest.raises(TypeError):
        _C._stats_add(0, "graphs", 1)
    with pytest.raises(RuntimeError, match="stats field out of range"):
        _C._stats_add(0, len(registry.FIELD_INDEX) + 5, 1)
    with pytest.raises(RuntimeError, match="stats field out of range"):
        _C._stats_add(-1, field, 1)
    assert own()["graphs"] == before
    _C._stats_add(0, field, 2)
    assert own()["graphs"] == before + 2
