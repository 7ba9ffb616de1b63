"""Host figures from /proc: CPU time and memory (neuron-monitor's system_data)."""
from __future__ import annotations

import os

from ...runtime.stats_page import proc_stat_fields

CPU_FIELDS = ("user", "nice", "system", "idle", "io_wait", "irq", "soft_irq")
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_times() -> dict[str, tuple[int, ...]]:
    """Per-CPU jiffies ("all" and "0", "1", ...) in CPU_FIELDS order, plus context switches."""
    out: dict[str, tuple[int, ...]] = {}
    with open("/proc/stat") as f:
        for line in f:
            parts = line.split()
            if parts[0].startswith("cpu"):
                key = parts[0][3:] or "all"
                out[key] = tuple(int(v) for v in parts[1:1 + len(CPU_FIELDS)])
            elif parts[0] == "ctxt":
                out["ctxt"] = (int(parts[1]),)
    return out


def cpu_usage(before: dict, after: dict) -> dict[str, dict[str, float]]:
    """Percent of time per field between two cpu_times() readings."""
    usage = {}
    for key, now in after.items():
        if key == "ctxt" or key not in before:
            continue
        delta = [a - b for a, b in zip(now, before[key])]
        total = sum(delta) or 1
        usage[key] = {name: round(100.0 * d / total, 2) for name, d in zip(CPU_FIELDS, delta)}
    return usage


def memory_info() -> dict[str, int]:
    values = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            values[key] = int(rest.split()[0]) * 1024
    total, available = values.get("MemTotal", 0), values.get("MemAvailable", 0)
    swap_total, swap_free = values.get("SwapTotal", 0), values.get("SwapFree", 0)
    return {"memory_total_bytes": total, "memory_used_bytes": total - available,
            "swap_total_bytes": swap_total, "swap_used_bytes": swap_total - swap_free}


def process_cpu_seconds(pid: int) -> tuple[float, float] | None:
    """(user, system) CPU seconds of a process, None if it is gone."""
    rest = proc_stat_fields(pid)
    if rest is None:
        return None
    return int(rest[11]) / TICKS, int(rest[12]) / TICKS


def process_rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0
