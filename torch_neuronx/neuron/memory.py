"""Memory statistics of torch.neuron, exact per logical core.

The numbers come from the C++ DeviceAllocator through torch.accelerator, so
torch.neuron.memory_* and torch.accelerator.memory_* always agree.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch

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
    """Release cached memory. The virtual core's allocator keeps no cache, so
    freed tensors are already returned; this exists for API parity."""
    torch.accelerator.empty_cache()


def _format_size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return str(n)


def memory_summary(device: DeviceLike = None, abbreviated: bool = False) -> str:
    """A human-readable table of the allocator statistics, like torch.cuda's."""
    idx = _idx(device)
    stats = memory_stats(idx)
    free, total = mem_get_info(idx)
    rows = [("Allocated memory", "allocated_bytes", True), ("Active memory", "active_bytes", True),
             ("Requested memory", "requested_bytes", True), ("Reserved memory", "reserved_bytes", True),
             ("Allocations", "allocation", False), ("Active allocs", "active", False),
             ("Segments", "segment", False)]
    pools = ["all"] if abbreviated else ["all", "large_pool", "small_pool"]
    line = "=" * 79
    out = [line, f" torch.neuron memory summary, device neuron:{idx}".ljust(79), line,
           f"{'Metric':<28}|{'Cur Usage':>12} |{'Peak Usage':>12} |{'Tot Alloc':>11} |{'Tot Freed':>10}",
           "-" * 79]
    for title, key, is_bytes in rows:
        for pool in pools:
            fmt = _format_size if is_bytes else str
            label = title if pool == "all" else f"  from {pool.replace('_', ' ')}"
            vals = [stats.get(f"{key}.{pool}.{k}", 0) for k in ("current", "peak", "allocated", "freed")]
            out.append(f"{label:<28}|{fmt(vals[0]):>12} |{fmt(vals[1]):>12} |{fmt(vals[2]):>11} |{fmt(vals[3]):>10}")
        out.append("-" * 79)
    out.append(f"HBM of this logical core: {_format_size(total)} total, {_format_size(free)} free; "
               f"OOMs: {stats.get('num_ooms', 0)}")
    out.append(line)
    return "\n".join(out) + "\n"
