"""The "distributed" section of a rank's dry-run report (plan/_report.py adds it to every report).

Keys: rank, local_rank, node, world_size, local_world_size (torchrun's environment; rank 0 of 1
without it), collectives ({kind: {count, bytes, seconds, groups: {"0,1": count}}}: seconds are each
call's whole estimate, launch included; groups the global ranks of the groups that ran them),
collective_count, step_ends_s (the rank's estimated device time at the end of each optimizer
step), step_times_s, step_time_s (the mean of the steps after the first, which also pays for
setup; the only step if there is one; None without optimizer steps).
"""
from __future__ import annotations

import os

def collectives_by_kind(events) -> dict:
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


def steady_step_time(step_ends: list[float]) -> float | None:
    times = step_times(step_ends)
    if len(times) >= 2:
        return sum(times[1:]) / len(times[1:])
    return times[0] if times else None


def section(est, step_ends=()) -> dict:
    """`step_ends`: the dry run's step clock (plan/_steps.py), `est`'s device time at each step end."""
    env = os.environ
    collectives = collectives_by_kind(est.events)
    ends = list(step_ends)
    return {
        "rank": int(env.get("RANK", 0) or 0),
        "local_rank": int(env.get("LOCAL_RANK", 0) or 0),
        "node": int(env.get("GROUP_RANK", 0) or 0),
        "world_size": int(env.get("WORLD_SIZE", 1) or 1),
        "local_world_size": int(env.get("LOCAL_WORLD_SIZE", 1) or 1),
        "collectives": collectives,
        "collective_count": sum(c["count"] for c in collectives.values()),
        "step_ends_s": ends,
        "step_times_s": step_times(ends),
        "step_time_s": steady_step_time(ends),
    }
