"""One rank's dry-run report (a plain dict, JSON-ready), built after its script has finished.

Keys: rank, local_rank, node, world_size, local_world_size, instance, lnc,
peak_hbm_bytes_per_core (this rank's own core, neuron:LOCAL_RANK), peak_hbm_bytes_by_core (every
core it touched), hbm_capacity_bytes_per_core, collectives ({kind: {count, bytes, seconds,
groups: {"0,1": count}}}), collective_count, estimated_time_s (the rank's estimated device time,
all of the script), steps (optimizer steps seen), step_times_s, step_time_s (mean of the steps
after the first, which also pays for setup; the only step if there is one; else the whole run),
exit_code, error.
"""
from __future__ import annotations

import os

import torch


def collectives_by_kind(events) -> dict:
    """{kind: {count, bytes, seconds, groups}} over the collective events of an estimate."""
    out: dict = {}
    for e in events:
        if e.kind != "collective":
            continue
        kind = e.category.split(":", 1)[1]
        entry = out.setdefault(kind, {"count": 0, "bytes": 0, "seconds": 0.0, "groups": {}})
        entry["count"] += 1
        entry["bytes"] += e.bytes
        entry["seconds"] += e.seconds
        ranks = e.detail.get("ranks")
        key = ",".join(map(str, ranks)) if ranks is not None else f"size {e.detail.get('group_size')}"
        entry["groups"][key] = entry["groups"].get(key, 0) + 1
    return out


def step_times(step_ends: list[float]) -> list[float]:
    return [b - a for a, b in zip([0.0] + step_ends[:-1], step_ends)]


def step_time(step_ends: list[float], total_s: float) -> float:
    times = step_times(step_ends)
    if len(times) >= 2:
        return sum(times[1:]) / len(times[1:])
    return times[0] if times else total_s


def _peaks() -> dict[int, int]:
    if not (hasattr(torch, "neuron") and torch.neuron.is_initialized()):
        return {}
    peaks = {}
    for index in range(torch.neuron.device_count()):
        peak = torch.neuron.max_memory_allocated(index)
        if peak:
            peaks[index] = int(peak)
    return peaks


def _capacity(index: int) -> int | None:
    try:
        return int(torch.neuron.get_device_properties(index).total_memory)
    except Exception:  # noqa: BLE001 - the capacity is a label; the device may not have started
        return None


def rank_report(est, step_ends: list[float], exit_code: int, error: str | None) -> dict:
    env = os.environ
    rank = int(env.get("RANK", 0))
    local_rank = int(env.get("LOCAL_RANK", 0))
    peaks = _peaks()
    hw = est.hardware
    collectives = collectives_by_kind(est.events)
    return {
        "rank": rank,
        "local_rank": local_rank,
        "node": int(env.get("GROUP_RANK", 0)),
        "world_size": int(env.get("WORLD_SIZE", 1)),
        "local_world_size": int(env.get("LOCAL_WORLD_SIZE", 1)),
        "instance": hw.instance.name,
        "lnc": hw.lnc,
        "peak_hbm_bytes_per_core": peaks.get(local_rank, 0),
        "peak_hbm_bytes_by_core": {str(k): v for k, v in peaks.items()},
        "hbm_capacity_bytes_per_core": _capacity(local_rank) if peaks else None,
        "collectives": collectives,
        "collective_count": sum(c["count"] for c in collectives.values()),
        "estimated_time_s": est.total_s,
        "steps": len(step_ends),
        "step_times_s": step_times(step_ends),
        "step_time_s": step_time(step_ends, est.total_s),
        "exit_code": exit_code,
        "error": error,
    }
