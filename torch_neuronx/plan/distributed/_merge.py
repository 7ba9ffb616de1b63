"""Merge the per-rank dry-run reports (plan/_report.py, each with its "distributed" section) into one.

JSON keys of `python -m torch_neuronx.plan run --nproc-per-node N ... --json OUT.json`:
    schema_version, kind ("merged"; plan/report_model.py), world_size, nnodes, nproc_per_node, instance, lnc,
    dry_run                   every started rank ran with phantom device memory
    ranks_run                 the ranks that were started
    represented_by            list per rank: the started rank whose report stands in for it (_roles.py)
    peak_hbm_bytes_per_core   list per rank: the peak allocated bytes of the rank's own core
                              (neuron:LOCAL_RANK), as torch.neuron.max_memory_allocated reports it
    hbm_capacity_bytes_per_core, headroom_bytes_per_core (on the fullest core)
    fits                      every rank's peak within its core's HBM and no rank out of memory
    oom                       {rank: the failing allocation} for the ranks that ran out of memory
    step_time_s               the slowest rank's estimated step time (ranks wait for each other at
                              their collectives, so the job runs at the slowest rank's pace): the
                              mean of its optimizer steps after the first; the whole run without steps
    slowest_rank, estimated_total_s (that rank's whole script)
    step_time_s_range, estimated_total_s_range, ranges   the calibrated 80% ranges of the slowest
                              rank's kind (plan/_run_ranges.py), when its report has them
    collectives               the slowest rank's collectives by kind: {count, bytes, seconds, groups}
    collectives_by_rank       {rank: collectives by kind} for every started rank
    host_sync_count_by_rank   {rank: host syncs}
    ranks                     the started ranks' own reports, by rank
"""
from __future__ import annotations

from ...runtime.units import markdown_table, seconds, size
from .._report_ranges import basis_lines, text as range_text
from .._run_ranges import merged as merged_ranges
from ..report_model import normalized, stamped
from . import _roles as roles


def _peak(report: dict) -> int:
    local = report["distributed"]["local_rank"]
    for core in report.get("cores", []):
        if core["device"] == local:
            return int(core["peak_allocated_bytes"])
    return int(report["peak_hbm_bytes_per_core"])


def _step_time(report: dict) -> float:
    d = report["distributed"]
    if d.get("step_time_s") is not None:
        return d["step_time_s"]
    return report["estimated_total_s"]


def merge(reports: dict[int, dict], *, world_size: int, nnodes: int, nproc_per_node: int, pp: int = 1) -> dict:
    reports = {r: normalized(report) for r, report in reports.items()}   # any schema version's rank reports
    run = sorted(reports)
    rep = [roles.representative(r, run, world_size=world_size, pp=pp) for r in range(world_size)]
    peaks = [_peak(reports[rep[r]]) for r in range(world_size)]
    slowest = max(run, key=lambda r: (_step_time(reports[r]), -r))
    first = reports[run[0]]
    capacity = first.get("hbm_capacity_bytes_per_core")
    oom = {str(r): reports[r]["oom"] for r in run if reports[r].get("oom")}
    fits = not oom and (capacity is None or all(p <= capacity for p in peaks))
    return stamped("merged", {
        "world_size": world_size,
        "nnodes": nnodes,
        "nproc_per_node": nproc_per_node,
        "instance": first.get("instance"),
        "lnc": first.get("lnc"),
        "dry_run": all(reports[r].get("dry_run") for r in run),
        "ranks_run": run,
        "represented_by": rep,
        "peak_hbm_bytes_per_core": peaks,
        "hbm_capacity_bytes_per_core": capacity,
        "fits": fits,
        "oom": oom,
        "headroom_bytes_per_core": None if capacity is None else capacity - max(peaks),
        "step_time_s": _step_time(reports[slowest]),
        "slowest_rank": slowest,
        "estimated_total_s": reports[slowest]["estimated_total_s"],
        "collectives": reports[slowest]["distributed"]["collectives"],
        "collectives_by_rank": {str(r): reports[r]["distributed"]["collectives"] for r in run},
        "host_sync_count_by_rank": {str(r): reports[r].get("host_sync_count", 0) for r in run},
        "ranks": {str(r): reports[r] for r in run},
        # step_time_s_range, estimated_total_s_range, ranges: the slowest rank's kind (plan/_run_ranges.py)
        **merged_ranges(reports[slowest], _step_time(reports[slowest])),
    })


def _at_peak(rank: int, report: dict) -> str:
    """'rank 0 at its peak: parameters ..., gradients ...; neuron:0 peaks in step 2's forward (...)'."""
    from .._report import _where_text

    cores = report.get("cores") or []
    if not cores:
        return f"- rank {rank}: no neuron memory allocated"
    core = max(cores, key=lambda c: c["peak_allocated_bytes"])
    parts = ", ".join(f"{k.replace('_', ' ')} {size(v)}" for k, v in core["breakdown"].items()
                      if k != "at_allocated_bytes" and v)
    where = f"; {_where_text(core)}" if core.get("peak_at") else ""
    return f"- rank {rank} at its peak: {parts or 'nothing'}{where}"


def markdown(merged: dict) -> str:
    """The printed summary: layout, memory per rank role, step time, collectives by kind."""
    m = merged
    lines = [f"## Dry run: {m['world_size']} ranks ({m['nnodes']} node(s) x {m['nproc_per_node']}) "
             f"on {m['instance']} LNC={m['lnc']}",
             f"ranks run: {', '.join(map(str, m['ranks_run']))} (others take the report of the rank "
             f"shown under 'as')", ""]
    rows = []
    for r in sorted(set(m["ranks_run"]) | {0, m["world_size"] - 1}):
        src = m["represented_by"][r]
        rr = m["ranks"][str(src)]
        rows.append((r, src, size(m["peak_hbm_bytes_per_core"][r]), size(m["hbm_capacity_bytes_per_core"]),
                     seconds(_step_time(rr)), rr["distributed"]["collective_count"]))
    lines += markdown_table(["rank", "as", "peak HBM / core", "capacity", "step time", "collectives"], rows,
                            align="rrrrrr")
    lines += [""] + [_at_peak(r, m["ranks"][str(r)]) for r in m["ranks_run"] if m["ranks"].get(str(r))]
    fits = "yes" if m["fits"] else "NO"
    for rank, oom in m["oom"].items():
        lines += ["", f"**rank {rank} out of memory** on neuron:{oom['device']} at `{oom['site']}`: {oom['message']}"]
    lines += ["", f"fits: {fits}; headroom {size(m['headroom_bytes_per_core'])} on the fullest core"
              + ("" if m["dry_run"] else " (device memory was real, not phantom)"),
              f"step time (slowest rank, {m['slowest_rank']}): {seconds(m['step_time_s'])}"
              f"{range_text(m, 'step_time_s')}", *basis_lines(m), ""]
    if m["collectives"]:
        lines += [f"collectives of rank {m['slowest_rank']} (whole run):", ""]
        lines += markdown_table(
            ["kind", "count", "bytes", "estimated time", "groups"],
            [(kind, c["count"], size(c["bytes"]), seconds(c["seconds"]),
              "; ".join(f"[{g}] x{n}" for g, n in sorted(c["groups"].items())))
             for kind, c in sorted(m["collectives"].items())], align="lrrrl")
    return "\n".join(lines)
