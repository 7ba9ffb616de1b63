"""The parts every model-level plan reports: the layout, the model, memory per core and fit."""
from __future__ import annotations

import json

from .._report_ranges import attach as attach_ranges
from .._report_ranges import basis_lines, with_ranges
from ..report_model import SCHEMA_VERSION, stamped


def _phantom() -> bool:
    from ... import _C

    return bool(_C._allocator_phantom())


def dry_run_extras() -> dict:
    """From the process's dry run (torch_neuronx.plan), when there is one: the per-core breakdown
    at the peak by category, and the host-sync sites (each is a synchronisation on Trainium too)."""
    from .. import active

    run = active()
    if run is None:
        return {}
    data = run.report()
    cores = data.get("cores") or [{}]
    return {"memory_at_peak_bytes_per_core": cores[0].get("breakdown"), "host_syncs": data["host_syncs"],
            "ops_by_name": data["ops_by_name"],   # the counts of the notes' unmodelled ops
            "host_sync_count": data["host_sync_count"], "dry_run_oom_site": (data.get("oom") or {}).get("site"),
            "compile_budget": data.get("compile_budget")}   # the graphs the plan compiled (plan/_compile_budget.py)


def base_report(layout, config, model, region, dtype, dry_run: bool | None = None) -> dict:
    from .._ranges import is_moe
    from ..distributed._report import collectives_by_kind
    from .._timeline import summary as timeline_summary
    from .._wording import overridden_assumptions, overridden_settings
    from ._build import local_bytes

    peak = region.peak_bytes()
    capacity = region.capacity
    fits = region.oom is None and peak <= capacity
    params = local_bytes(model.parameters()) if model is not None else None
    kv = _kv_layout(layout, config)
    count = _parameter_count(model)
    if count is not None:
        count -= kv.pop("replica_parameters")   # the model's own parameters, not the KV copies
    return {
        "schema_version": SCHEMA_VERSION, "kind": "model",
        "instance": layout.instance, "lnc": layout.lnc, "nodes": layout.nodes,
        "world_size": layout.world_size, "layout": layout.describe(),
        "tp": layout.tp, "cp": layout.cp, "fsdp": layout.fsdp, "dp": layout.dp, "pp": layout.pp,
        "model_type": config.model_type,
        "moe": is_moe(config.to_dict()),   # routes tokens to experts: its figures take the MoE kinds' ranges
        "parameters": count,
        **kv,
        "dtype": str(dtype).replace("torch.", ""),
        "dry_run": _phantom(),   # phantom device memory: nothing was allocated on the host
        "peak_hbm_bytes_per_core": peak,
        "hbm_capacity_bytes_per_core": capacity,
        "headroom_bytes_per_core": capacity - peak,
        "fits": fits,
        "oom": region.oom,
        "memory_breakdown_bytes_per_core": {"parameters": params},
        "time_breakdown_s": region.by_category(),
        "collectives": region.collectives(),
        "unmodelled_ops": region.unmodelled(),   # the recording the notes list too
        # for the HTML page: the estimated timeline and the collectives' groups of what was timed
        "timeline": timeline_summary(region.est.events),
        "collective_groups": collectives_by_kind(region.est.events),
        "assumptions_overridden": {**overridden_assumptions(region.est.hardware.assumptions),
                                   **overridden_settings()},
        **dry_run_extras(),
    }


def _kv_layout(layout, config) -> dict:
    """KV heads per TP rank, and whether TP replicates them (TP > KV heads, as NxD Inference does)."""
    from ._layout import kv_replication, tp_shards_kv_heads

    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    kv = getattr(text, "num_key_value_heads", None) or getattr(text, "num_attention_heads", None)
    copies = max(kv_replication(layout.tp, text), 1)
    if not isinstance(kv, int):
        return {"kv_heads_per_rank": None, "kv_head_copies": 1, "replica_parameters": 0}
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    bias = head_dim if getattr(text, "attention_bias", False) else 0
    # k_proj and v_proj of every layer gain (copies - 1) x KV heads of [head_dim, hidden] (+ bias)
    extra = 2 * text.num_hidden_layers * (copies - 1) * kv * (head_dim * text.hidden_size + bias)
    per_rank = max(kv * copies // layout.tp, 1) if tp_shards_kv_heads(text) else kv * copies
    return {"kv_heads_per_rank": per_rank, "kv_head_copies": copies,
            "replica_parameters": extra}


def _parameter_count(model) -> int | None:
    """Parameters of the whole model (a DTensor counts its global shape)."""
    if model is None:
        return None
    return sum(p.numel() for p in model.parameters())


def write_json(report: dict, path: str | None) -> None:
    attach_ranges(report)   # the figures' calibrated ranges (plan/_report_ranges.py)
    if path:
        report = stamped("model", report)   # checked against the one report model before it is written
        with open(path, "w") as f:
            json.dump(report, f, indent=1, default=str)


def markdown(report: dict, title: str, rows: list[tuple[str, str]]) -> str:
    """A short human-readable report: layout, assumptions, fit, the command's own figures, notes."""
    from .._notes import markdown as notes_markdown
    from .._wording import assumption_lines, markdown_table, number, plural, seconds, size

    lines = [f"# {title}: {report['layout']} ({plural(report['world_size'], 'rank')}, {report['dtype']}"
             f"{', dry run' if report['dry_run'] else ', real run'})", "",
             *assumption_lines(report.get("mode", "eager"), report.get("assumptions_overridden") or {}), "",
             f"model: {report['model_type']}, {number(report['parameters'] or 0)} parameters", ""]
    lines += markdown_table(["per core", ""], [
        ("peak HBM", size(report["peak_hbm_bytes_per_core"])),
        ("capacity", size(report["hbm_capacity_bytes_per_core"])),
        ("fits", "yes" if report["fits"] else "NO"),
        *((name.replace("_", " "), size(value)) for name, value in report["memory_breakdown_bytes_per_core"].items())])
    if report["oom"]:
        lines += ["", f"out of memory: {report['oom']}"]
    lines += [""] + markdown_table(["estimate", ""], with_ranges(report, rows))
    basis = basis_lines(report)
    lines += [""] + basis if basis else []
    top = list(report["time_breakdown_s"].items())[:6]
    if top:
        lines += [""] + markdown_table(["time by category (one step)", ""], [(k, seconds(v)) for k, v in top])
    from .._compile_budget import markdown as budget_lines

    lines += budget_lines(report.get("compile_budget"))
    lines += notes_markdown(report.get("notes") or [])
    return "\n".join(lines)
