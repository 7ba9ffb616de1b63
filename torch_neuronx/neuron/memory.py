"""Memory statistics of torch.neuron, exact per logical core, and snapshots.

The numbers come from the C++ caching allocator (csrc/allocator.cpp) through
torch.accelerator, so torch.neuron.memory_* and torch.accelerator.memory_*
always agree. Execution on the virtual core is synchronous, so the figures are
current without torch.neuron.synchronize(); calling it first, as TorchNeuron's
memory guide asks, works the same. Snapshots use PyTorch's snapshot format:
torch.cuda._memory_viz (trace_plot, segment_plot) and pytorch.org/memory_viz
open them.
"""
from __future__ import annotations

from collections import OrderedDict
import pickle
import sys
import warnings
from typing import Any

import torch

from ..runtime.units import size
from ._utils import DeviceLike, device_index


def _idx(device: DeviceLike) -> int:
    idx = device_index(device)
    from .. import _C

    _C._check_device(idx)
    return idx


def memory_stats(device: DeviceLike = None) -> OrderedDict[str, Any]:
    """Allocator statistics in torch.cuda.memory_stats' flat format."""
    return torch.accelerator.memory_stats(_idx(device))


def memory_allocated(device: DeviceLike = None) -> int:
    return torch.accelerator.memory_allocated(_idx(device))


def max_memory_allocated(device: DeviceLike = None) -> int:
    return torch.accelerator.max_memory_allocated(_idx(device))


def memory_reserved(device: DeviceLike = None) -> int:
    return torch.accelerator.memory_reserved(_idx(device))


def max_memory_reserved(device: DeviceLike = None) -> int:
    return torch.accelerator.max_memory_reserved(_idx(device))


def reset_peak_memory_stats(device: DeviceLike = None) -> None:
    torch.accelerator.reset_peak_memory_stats(_idx(device))


def reset_accumulated_memory_stats(device: DeviceLike = None) -> None:
    torch.accelerator.reset_accumulated_memory_stats(_idx(device))


def reset_max_memory_allocated(device: DeviceLike = None) -> None:
    reset_peak_memory_stats(device)


def mem_get_info(device: DeviceLike = None) -> tuple[int, int]:
    """(free, total) HBM bytes of the logical core."""
    return torch.accelerator.get_memory_info(_idx(device))


def empty_cache() -> None:
    """Return the cached segments that hold no tensor (on every core), so that
    reserved memory, and the HBM charged for it, drops to what is in use."""
    torch.accelerator.empty_cache()


_history_on = False


def _record_memory_history(enabled: str | None = "all", context: str | None = "all", stacks: str = "all",
                           max_entries: int = sys.maxsize, device: DeviceLike = None) -> None:
    """Start (or with enabled=None, stop) recording allocator history, as
    torch.cuda.memory._record_memory_history.

    Args:
        enabled: "all" records trace entries (alloc, free, segment_alloc, ...) and
            the stacks of live blocks; "state" records only the stacks of live blocks;
            None stops recording and drops the history.
        context: None records no stacks; "state", "alloc" or "all" record them.
        stacks: "python" for Python frames, "all" adds TorchScript and C++ frames.
        max_entries: trace entries kept per device (oldest dropped first).
        device: accepted for torch.cuda parity; history covers every core.
    """
    global _history_on
    if enabled is True:
        enabled = "all"
    if enabled not in (None, False, "state", "all"):
        raise ValueError(f"enabled={enabled!r}: use 'all', 'state' or None (stop recording).")
    if context not in (None, "state", "alloc", "all"):
        raise ValueError(f"context={context!r}: use 'all', 'alloc', 'state' or None.")
    if stacks not in ("python", "all"):
        raise ValueError(f"stacks={stacks!r}: use 'python' or 'all'.")
    if not isinstance(max_entries, int) or max_entries < 1:
        raise ValueError(f"max_entries={max_entries!r}: use a positive integer.")
    if device is not None:
        _idx(device)
    from .. import _C

    on = enabled not in (None, False)
    _C._record_memory_history(on, enabled == "all", min(max_entries, 2**62),
                              "none" if context is None else stacks)
    _history_on = on


def _snapshot(device: DeviceLike = None) -> dict[str, Any]:
    """The allocator state (segments, blocks and their stacks) and the recorded
    trace, in torch.cuda.memory._snapshot's format."""
    from .. import _C

    if not _history_on:
        warnings.warn("no memory history is being recorded, so the snapshot has no stacks or trace; call "
                      "torch.neuron.memory._record_memory_history() before the code to inspect.", stacklevel=2)
    snap = _C._memory_snapshot()
    recording = snap.pop("recording")
    traces = list(snap["device_traces"])
    traces += [[] for _ in range(torch.neuron.device_count() - len(traces))]
    snap["device_traces"] = traces
    snap["allocator_settings"] = {"recording": recording, "cache_limit_bytes": _C._allocator_cache_limit(),
                                  "small_pool_limit": 1 << 20, "round_limit": 16 << 20, "min_block_size": 256}
    if device is not None:
        idx = _idx(device)
        snap["segments"] = [s for s in snap["segments"] if s["device"] == idx]
    return snap


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    """Pickle _snapshot() to `filename` (open it with torch.cuda._memory_viz or pytorch.org/memory_viz)."""
    if not _history_on:
        raise RuntimeError("no memory history is being recorded: call "
                           "torch.neuron.memory._record_memory_history() before the code to inspect, then "
                           f"_dump_snapshot({filename!r}).")
    if not isinstance(filename, (str, bytes)) and not hasattr(filename, "__fspath__"):
        raise TypeError(f"filename must be a path, not {type(filename).__name__}")
    snap = _snapshot()
    with open(filename, "wb") as f:
        pickle.dump(snap, f)


def memory_summary(device: DeviceLike = None, abbreviated: bool = False) -> str:
    """A human-readable table of the allocator statistics, like torch.cuda's."""
    idx = _idx(device)
    stats = memory_stats(idx)
    free, total = mem_get_info(idx)
    rows = [("Allocated memory", "allocated_bytes", True), ("Active memory", "active_bytes", True),
             ("Requested memory", "requested_bytes", True), ("Reserved memory", "reserved_bytes", True),
             ("Non-releasable memory", "inactive_split_bytes", True),
             ("Allocations", "allocation", False), ("Active allocs", "active", False),
             ("Reserved segments", "segment", False), ("Non-releasable allocs", "inactive_split", False)]
    pools = ["all"] if abbreviated else ["all", "large_pool", "small_pool"]
    line = "=" * 79
    out = [line, f" torch.neuron memory summary, device neuron:{idx}".ljust(79), line,
           f"{'Metric':<28}|{'Cur Usage':>12} |{'Peak Usage':>12} |{'Tot Alloc':>11} |{'Tot Freed':>10}",
           "-" * 79]
    for title, key, is_bytes in rows:
        for pool in pools:
            fmt = size if is_bytes else str
            label = title if pool == "all" else f"  from {pool.replace('_', ' ')}"
            vals = [stats.get(f"{key}.{pool}.{k}", 0) for k in ("current", "peak", "allocated", "freed")]
            out.append(f"{label:<28}|{fmt(vals[0]):>12} |{fmt(vals[1]):>12} |{fmt(vals[2]):>11} |{fmt(vals[3]):>10}")
        out.append("-" * 79)
    cached = stats.get("reserved_bytes.all.current", 0) - stats.get("allocated_bytes.all.current", 0)
    out.append(f"Free but cached (reserved - allocated): {size(cached)}; empty_cache() returns the "
               f"wholly free segments")
    out.append(f"HBM of this logical core: {size(total)} total, {size(free)} free; "
               f"OOMs: {stats.get('num_ooms', 0)}, alloc retries: {stats.get('num_alloc_retries', 0)}")
    out.append(line)
    return "\n".join(out) + "\n"
