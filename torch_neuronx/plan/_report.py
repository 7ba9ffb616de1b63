"""The dry-run report: a JSON-able dict (schema in docs/plan.md), its markdown, a Chrome trace."""
from __future__ import annotations

import json

from ..runtime.units import counts_since
from ._compile_budget import markdown as budget_lines, section as budget_section
from ._fallbacks import markdown_lines as fallback_lines
from . import _notes as notes_mod
from ._report_ranges import basis_lines, text as range_text
from ._run_ranges import attach as attach_ranges
from ._timeline import summary as timeline_summary
from ._wording import assumption_lines, plural, overridden_assumptions, overridden_settings, seconds, size

from .report_model import stamped


def _time_breakdown(est) -> dict:
    """Seconds by what bounds them; collectives by kind with their bytes."""
    out = {"compute_s": 0.0, "memory_s": 0.0, "launch_s": 0.0, "cpu_fallback_s": 0.0, "collectives": {}}
    for e in est.events:
        out["launch_s"] += e.launch_s
        if e.kind == "collective":
            kind = e.category.split(":", 1)[-1]
            row = out["collectives"].setdefault(kind, {"count": 0, "seconds": 0.0, "bytes": 0})
            row["count"] += 1
            row["seconds"] += e.seconds - e.launch_s
            row["bytes"] += e.bytes
        elif e.bound == "host":      # a CPU fallback: host-link copies and host time (estimate/_fallbacks.py)
            out["cpu_fallback_s"] += e.seconds
        elif e.bound == "compute":
            out["compute_s"] += e.seconds - e.launch_s
        else:
            out["memory_s"] += e.seconds - e.launch_s
    return out


def build(run) -> dict:
    """Everything the report says, from a DryRun (call after or inside its `with`)."""
    from .. import _C
    from .distributed._report import section as distributed_section

    est = run.estimate
    hw = est.hardware
    cores = run.memory.per_core()
    breakdown = _time_breakdown(est)
    n_syncs = run.syncs.total
    breakdown["host_syncs_s"] = n_syncs * hw.assumptions.host_sync_s
    total = est.total_s + breakdown["host_syncs_s"]
    m0, m1 = run._metrics0, run._metrics1
    graph_names = sorted({e.name for e in est.events if e.kind == "graph"})
    steps = run.optimizer_steps
    report = {
        "dry_run": bool(_C._allocator_phantom()),
        "instance": hw.instance.name, "lnc": hw.lnc, "logical_cores_per_instance": hw.logical_cores,
        "peak_hbm_bytes_per_core": max((c["peak_allocated_bytes"] for c in cores), default=0),
        "peak_reserved_bytes_per_core": max((c["peak_reserved_bytes"] for c in cores), default=0),
        "hbm_capacity_bytes_per_core": cores[0]["capacity_bytes"] if cores else int(_C._hbm_capacity(0)),
        "fits": run.memory.oom is None,
        "oom": run.memory.oom,
        "headroom_bytes_per_core": min((c["headroom_bytes"] for c in cores), default=None),
        "cores": cores,
        "host_syncs": run.syncs.as_list(),
        "host_sync_count": n_syncs,
        "cpu_fallbacks": run.fallbacks.as_list(),   # ops TorchNeuron runs on the host CPU, per site
        "estimated_total_s": total,
        "optimizer_steps": steps,
        "generate_calls": list(run.generation.calls),   # per generate(): TTFT, TPOT (plan/_generation.py)
        "estimated_step_s": total / steps if steps else None,
        "time_by_bound_s": breakdown,
        "flops": est.flops,
        "mfu": est.flops / (total * hw.peak_flops_bf16) if total > 0 else 0.0,
        "ops": sum(run.ops.values()),
        "ops_by_name": dict(sorted(run.ops.items(), key=lambda kv: -kv[1])),
        "estimated_events": len(est.events),
        "compiled": {
            "distinct_graphs": len(graph_names),
            "graphs_compiled": m1["graphs_compiled"] - m0["graphs_compiled"],
            "recompilations": m1["recompilations"] - m0["recompilations"],
            "recompile_reasons": m1["recompile_reasons"][len(m0["recompile_reasons"]):],
            "graph_breaks": m1["graph_breaks"] - m0["graph_breaks"],
            # why code ran eagerly between graphs (its ops are then costed one by one, not fused)
            "graph_break_reasons": counts_since(m1["graph_break_reasons"], m0["graph_break_reasons"]),
            "graph_names": graph_names,
        },
        # the graphs compiled, why, what a cache serves, their neuronx-cc time (plan/_compile_budget.py)
        "compile_budget": budget_section(run._compile_log0),
        "unmodelled_ops": sorted(est.unmodelled),
        "planning_wall_s": run.wall_s,
        # eager unless something compiled: how the script's ops were costed
        "mode": "compiled graphs and eager ops between them" if graph_names else "eager",
        "assumptions": {"host_sync_s": hw.assumptions.host_sync_s,
                        "overridden": {**overridden_assumptions(hw.assumptions), **overridden_settings()}},
        "notes": _notes(est, run.ops),     # warnings collected while planning (plan/_notes.py)
        "timeline": timeline_summary(est.events),   # one core's estimated timeline, for --html
        "distributed": distributed_section(est, run.steps.ends_s),   # rank, world, collectives by group (plan/distributed)
    }
    # the figures' calibrated ranges, by the kind of what the script ran (plan/_run_ranges.py)
    attach_ranges(report, backward=any(e.phase == "backward" for e in est.events),
                  overridden=bool(overridden_assumptions(hw.assumptions)))
    return stamped("rank", report)


def _notes(est, ops: dict) -> list[dict]:
    """The notes of the plan's collection (a `plan run` child collects them), else the unmodelled ops."""
    collected = notes_mod.last()
    if collected is None:
        collected = notes_mod.Collected()
    return collected.section(sorted(est.unmodelled), ops)


def _break_line(reason: str) -> str:
    """Dynamo's multi-line graph-break text as one markdown line: what broke and its explanation (the
    JSON keeps the whole text, with the hint and the link)."""
    lines = [ln.strip() for ln in reason.splitlines() if ln.strip()]
    explained = [ln for ln in lines[1:] if ln.startswith("Explanation:")]
    return "; ".join(lines[:1] + explained)


def _where_text(core: dict) -> str:
    """Which step and phase the breakdown is taken at ("neuron:0 peaks in step 2's forward"), so that
    a breakdown without gradients (dropped by zero_grad(set_to_none=True) before a forward) reads right."""
    at, b = core["peak_at"], core["breakdown"]
    what = "runs out of memory" if core.get("oom") else "peaks"
    if at["optimizer_steps_done"] == 0 and at["phase"] != "optimizer":
        when = f"the {at['phase']} before any optimizer step"
    else:
        when = f"step {at['step']}'s {at['phase']}"
    text = f"neuron:{core['device']} {what} in {when}" + (f" (in `{at['module']}`)" if at.get("module") else "")
    if at["phase"] == "forward" and at["optimizer_steps_done"] and not b.get("gradients"):
        text += ": no gradients are live there (zero_grad(set_to_none=True) freed them after the last step)"
    return text


def _generate_row(g: dict) -> str:
    tpot = seconds(g["tpot_ms"] / 1e3) if g["tpot_ms"] is not None else "-"
    rate = f"{g['output_tokens_per_s']:.1f}" if g["output_tokens_per_s"] else "-"
    return (f"| `{g['site']}` | {g['batch']} | {g['input_tokens']} | {g['new_tokens']} "
            f"| {seconds(g['ttft_ms'] / 1e3)} | {tpot} | {rate} |")


def _basis(r: dict) -> list[str]:
    """The ranges' basis under the figures (plan/_report_ranges.py), after a blank line."""
    lines = basis_lines(r)
    return ["", *lines] if lines else []


def markdown(r: dict) -> str:
    verdict = "fits" if r["fits"] else "does NOT fit"
    lines = [f"# Dry run on {r['instance']} (LNC={r['lnc']}): {verdict}", ""]
    if "mode" in r:
        lines += assumption_lines(r["mode"], r["assumptions"].get("overridden") or {}) + [""]
    lines.append("| core | peak allocated | peak reserved | capacity | headroom | parameters | gradients "
                 "| optimizer state | activations | KV cache | other |")
    lines.append("|---" * 11 + "|")
    for c in r["cores"]:
        b = c["breakdown"]
        lines.append(f"| neuron:{c['device']} | {size(c['peak_allocated_bytes'])} | {size(c['peak_reserved_bytes'])} "
                     f"| {size(c['capacity_bytes'])} | {size(c['headroom_bytes'])} | {size(b['parameters'])} "
                     f"| {size(b['gradients'])} | {size(b['optimizer_state'])} | {size(b['activations'])} "
                     f"| {size(b['kv_cache'])} | {size(b['other'])} |")
    where = [f"- {_where_text(c)}" for c in r["cores"] if c.get("peak_at")]
    lines += [""] + where if where else []
    if r["oom"]:
        lines += ["", f"**Out of memory** on neuron:{r['oom']['device']} at `{r['oom']['site']}`:", "",
                  f"> {r['oom']['message']}"]
    tb = r["time_by_bound_s"]
    lines += ["", "## Estimated time", "",
              f"total {seconds(r['estimated_total_s'])}{range_text(r, 'estimated_total_s')}"
              + (f", {plural(r['optimizer_steps'], 'optimizer step')}, {seconds(r['estimated_step_s'])} per step"
                 f"{range_text(r, 'estimated_step_s')}" if r["optimizer_steps"] else "")
              + f"; MFU {100 * r['mfu']:.1f}%", *_basis(r), "",
              "| compute | memory | launch | collectives | host syncs |", "|---|---|---|---|---|",
              f"| {seconds(tb['compute_s'])} | {seconds(tb['memory_s'])} | {seconds(tb['launch_s'])} "
              f"| {seconds(sum(c['seconds'] for c in tb['collectives'].values()))} | {seconds(tb['host_syncs_s'])} |"]
    for kind, c in tb["collectives"].items():
        lines.append(f"- {kind}: {plural(c['count'], 'call')}, {size(c['bytes'])}, {seconds(c['seconds'])}")
    gens = r.get("generate_calls") or []
    if gens:
        lines += ["", f"## generate() calls: {len(gens)}", "",
                  "| site | batch | input tokens | new tokens | TTFT | per output token | output tokens/s |",
                  "|---|---|---|---|---|---|---|"]
        lines += [_generate_row(g) for g in gens[:10]]
    comp = r["compiled"]
    lines += ["", f"## Compiled graphs: {comp['distinct_graphs']:,} distinct, {comp['graphs_compiled']:,} compiled, "
              f"{plural(comp['recompilations'], 'recompilation')}, {plural(comp['graph_breaks'], 'graph break')}"]
    lines += [f"- recompiled: {x}" for x in comp["recompile_reasons"][:10]]
    lines += [f"- graph break ({n}x): {_break_line(reason)}" for reason, n in list(comp["graph_break_reasons"].items())[:10]]
    lines += budget_lines(r.get("compile_budget"))
    lines += ["", f"## Host syncs: {r['host_sync_count']:,} (each a point where the host waits for the device)", ""]
    if r["host_syncs"]:
        lines += ["| site | kind | count |", "|---|---|---|"]
        lines += [f"| `{s['site']}` | {s['kind']} | {s['count']} |" for s in r["host_syncs"][:20]]
    lines += fallback_lines(r)
    if r.get("notes") is not None:
        lines += notes_mod.markdown(r["notes"])
    elif r["unmodelled_ops"]:
        lines += ["", "Ops without a cost model (counted as Vector-engine ops): " + ", ".join(r["unmodelled_ops"])]
    lines += ["", f"{r['ops']:,} neuron ops; planned in {r['planning_wall_s']:.1f} s"
              + ("" if r["dry_run"] else " (device memory was real: not a phantom-memory run)")
              + ". Estimates from the documented model (docs/estimate.md), not measurements."]
    return "\n".join(lines)


def chrome_trace(run, path: str) -> None:
    """The estimated device timeline: one track per logical core, events in stream order."""
    rows = []
    for e in run.estimate.events:
        rows.append({"name": e.name, "cat": e.category, "ph": "X", "pid": f"neuron:{e.device} (estimated)",
                     "tid": e.phase, "ts": e.start_s * 1e6, "dur": e.seconds * 1e6,
                     "args": {"flops": e.flops, "bytes": e.bytes, "bound": e.bound,
                              "module": e.modules[-1] if e.modules else ""}})
    with open(path, "w") as f:
        json.dump({"traceEvents": rows, "displayTimeUnit": "ms"}, f)
