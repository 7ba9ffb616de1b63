"""How plan reports say things: the product's one formatter for bytes, seconds, numbers and plurals
(runtime/units.py, re-exported here) and the assumptions a report rests on (stated at the top of every
report, markdown and HTML)."""
from __future__ import annotations

from ..runtime.units import markdown_table, number, plural, seconds, size  # noqa: F401  (the one formatter, re-exported)


def figure(value, unit: str = "", scale: float = 1.0, digits: int = 4) -> str:
    """A report's figure: `value` x `scale` to `digits` significant digits, then `unit`; "-" for none."""
    return "-" if value is None else f"{number(value * scale, digits)}{unit}"


def overridden_assumptions(assumptions) -> dict:
    """The cost model's assumptions that differ from their documented defaults (estimate/assumptions.py)."""
    from dataclasses import fields

    from ..estimate.assumptions import DEFAULTS

    return {f.name: getattr(assumptions, f.name) for f in fields(DEFAULTS)
            if getattr(assumptions, f.name) != getattr(DEFAULTS, f.name)}


def overridden_settings() -> dict:
    """Dry-run settings taken from the environment instead of their defaults."""
    import os

    from . import _dry_run_env as config

    out = {}
    for name in (config.LARGE_BYTES, config.MAX_SYNCS_PER_SITE):
        if os.environ.get(name):
            out[name] = os.environ[name]
    return out


def assumption_lines(mode: str, overridden: dict) -> list[str]:
    """The two lines every report starts with after its title."""
    over = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in overridden.items())
    return [f"assumed mode: **{mode}**; cost-model assumptions: "
            + (f"overridden: {over} (the rest as documented in docs/estimate.md)" if over
               else "the documented defaults (docs/estimate.md)")]


def deployed_layout_lines(report: dict) -> list[tuple[str, str]]:
    """How a deployed `generate` plan laid the model out beyond TP (the report's rows and the HTML
    page's): sequence parallelism, padded heads, padded vocabulary."""
    rows = []
    if report.get("sequence_parallel") is not None:
        rows.append(("sequence parallelism", "context encoding sequence-parallel (norms and residuals on 1/TP of "
                     "the prompt); decode step tensor-parallel" if report["sequence_parallel"]
                     else report.get("sequence_parallel_note") or "off"))
    moe = report.get("moe")
    if isinstance(moe, dict) and moe.get("ep"):
        rows.append(("experts", experts_split(moe, report["tp"])))
    pad = report.get("attention_heads_padded")
    if pad:
        rows.append(("attention heads", f"{pad['heads']} padded to {pad['padded_to']} (KV {pad['kv_heads']} -> "
                     f"{pad['kv_padded_to']}) so TP {report['tp']} divides them, as NxD Inference pads; the zero "
                     f"heads are computed and stored"))
    vocab = report.get("vocab_padded")
    if vocab:
        rows.append(("vocabulary", f"{vocab['vocab_size']} padded to {vocab['padded_to']} so TP {report['tp']} "
                     f"divides it, as NxD Inference pads its embedding and LM head"))
    return rows


def experts_split(moe: dict, tp: int) -> str:
    """How a deployed plan split the routed experts over the TP group (the report's `moe`)."""
    ep, e = moe["ep"], moe["expert_shape_per_rank"]["experts"]
    share = (f"intermediate {moe['intermediate_per_rank']:,} of {moe['intermediate']:,}" if moe["tp_per_expert"] > 1
             else f"full intermediate {moe['intermediate']:,}")
    if ep == 1:
        return f"TP {tp}: every rank holds all {e} experts, {share}"
    return (f"EP {ep} x TP {moe['tp_per_expert']} within the TP group: each rank holds {moe['experts_per_rank']} of "
            f"the {e} experts, {share}; attention and dense layers TP {tp}; the experts' outputs combine in the "
            f"MoE block's all-reduce over the TP group")


def train_layout_lines(report: dict) -> list[tuple[str, str]]:
    """How a `train` plan laid the model out beyond the sizes (the report's rows and the HTML page's):
    context parallelism, sequence parallelism, replicated KV heads."""
    rows = []
    if report.get("cp", 1) > 1:
        cp, seq = report["cp"], report["seq_len"]
        rows.append(("context parallelism", f"CP {cp}: each rank {seq // cp:,} of the {seq:,} tokens (load-balanced), "
                                            f"ring attention; FSDP over {report['fsdp'] * cp} ranks (FSDP x CP)"))
    if report.get("sequence_parallel") or report.get("sequence_parallel_note"):
        rows.append(("sequence parallelism", "on (norms and residuals on 1/TP of the sequence, vocabulary-parallel "
                     "loss)" if report["sequence_parallel"] else report["sequence_parallel_note"]))
    if report.get("kv_head_copies", 1) > 1:
        rows.append(("KV heads", f"replicated x{report['kv_head_copies']} ({report['kv_heads_per_rank']} per TP rank)"))
    return rows + train_model_lines(report)


def train_model_lines(report: dict) -> list[tuple[str, str]]:
    """What a `train` plan ran beyond the layout: the task, padding, recomputation, compiled graphs."""
    rows = []
    if report.get("task") and report["task"] != "causal-lm":
        extra = f", {report['image_size']} px images" if report.get("image_size") else ""
        rows.append(("task", f"{report['task']} ({report['auto_class']}{extra}, {report['seq_len']:,} tokens "
                             f"per sample)"))
    vocab = report.get("vocab_padded")
    if vocab:
        rows.append(("vocabulary", f"{vocab['vocab_size']:,} padded to {vocab['padded_to']:,} so TP {report['tp']} "
                     f"divides it, as Megatron-LM pads it (--make-vocab-size-divisible-by); the padded rows are "
                     f"computed and stored"))
    if report.get("activation_recompute") not in (None, "none"):
        rows.append(("activation recompute", "full (every layer checkpointed)" if report["activation_recompute"] == "full"
                     else "selective (the attention core recomputed, the linear layers' activations kept)"))
    graphs = report.get("compiled_graphs")
    if graphs:
        rows.append(("compiled graphs", f"{graphs['graphs_compiled']} compiled, {graphs['distinct_graphs_in_step']} "
                     f"run in the step, {graphs['recompilations']} recompilations, {graphs['graph_breaks']} breaks"))
    return rows
