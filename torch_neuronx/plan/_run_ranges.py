"""The calibrated 80% range of a `plan run` report's time figures (`estimated_total_s`,
`estimated_step_s`): the kind of a free script, read from what it ran, and that kind's range from
calibration/ranges.json (plan/_report_ranges.py reads the table and writes the text beside a figure).

A script's kind:
- arch: MoE when it ran a grouped expert matmul on the device (GROUPED_EXPERT_OPS: torch's
  `_grouped_mm`, which transformers' default experts implementation and torchtitan's MoE call, its
  scaled form, and the custom op transformers runs instead under torch.compile in dtypes other than
  bfloat16); else dense. Experts written as a Python loop of dense matmuls read as dense: nothing in
  the ops tells them from any other matmul.
- phase: train when it ran a backward pass or an optimizer step. A script that did neither ran
  prompts and token steps in an order the planner cannot take apart, so its figures take the hull of
  the prefill and decode ranges: whatever its mix of the two, the ratio of its actual to its planned
  time lies within the hull. A script that trained and called `generate()` takes the hull of all three.
- stack: none. A free script is run by no calibrated stack (NxD Training, NxD Inference), so its
  kind falls back to the pool every kind without rows takes (plan/_ranges.py).
"""
from __future__ import annotations

from ._ranges import Kind, Range
from ._report_ranges import OVERRIDDEN, table

FIGURES = ("estimated_total_s", "estimated_step_s")   # a rank report's figures that get a range

# the ops that compute a MoE layer's routed experts (their names as the dry run counts them)
GROUPED_EXPERT_OPS = frozenset({"aten::_grouped_mm", "aten::_scaled_grouped_mm",
                                "transformers::grouped_mm_fallback"})


def arch_of(report: dict) -> str:
    """'moe' when the script ran a grouped expert matmul (see the module docstring), else 'dense'."""
    return "moe" if GROUPED_EXPERT_OPS & set(report.get("ops_by_name") or {}) else "dense"


def phases_of(report: dict, backward: bool) -> tuple[str, ...]:
    """The phases whose ranges the script's figures take (see the module docstring)."""
    if not (backward or report.get("optimizer_steps")):
        return ("prefill", "decode")
    return ("train", "prefill", "decode") if report.get("generate_calls") else ("train",)


def _rule(phases: tuple[str, ...], arch: str) -> str:
    what = ("a MoE script (it ran grouped expert matmuls)" if arch == "moe"
            else "a dense script (it ran no grouped expert matmul)")
    if phases == ("train",):
        how = "it trained (backward passes or optimizer steps), so the train range"
    elif "train" in phases:
        how = "it trained and called generate(), so the hull of the train, prefill and decode ranges"
    else:
        how = ("it ran no backward pass or optimizer step, and a script's prompts and token steps cannot be "
               "taken apart, so the hull of the prefill and decode ranges")
    return f"plan run's figures: {what} on no calibrated stack; {how}"


def attach(report: dict, *, backward: bool, overridden: bool, ranges: dict | None = None) -> dict:
    """Add `estimated_total_s_range` (and `estimated_step_s_range` when there were steps) and `ranges`
    (the kinds, the rows, the rule) to a `plan run` report; `backward`: the script ran a backward
    pass; `overridden`: the cost model's assumptions differ from the defaults the ranges hold for.
    Without the kind in the table, `ranges.missing` says so and no figure gets a range."""
    data = table() if ranges is None else ranges
    arch, phases = arch_of(report), phases_of(report, backward)
    kinds = (data or {}).get("kinds") or {}
    entries = {p: kinds.get(Kind(arch, p, "").key) for p in phases}
    out = {"coverage": (data or {}).get("coverage_goal"),
           "assumptions": OVERRIDDEN if overridden else "default"}
    absent = [Kind(arch, p, "").key for p, e in entries.items() if e is None]
    if absent:
        where = "the calibration table" if data else "this install's calibration table (none found)"
        report["ranges"] = {**out, "missing": f"{where} has no range for {', '.join(absent)}, so this plan gives none"}
        return report
    used = {p: Range.from_json(e) for p, e in entries.items()}
    low, high = min(r.low for r in used.values()), max(r.high for r in used.values())
    hull = Range(low, high, (), "", "")
    for key in FIGURES:
        if report.get(key) is not None:
            report[f"{key}_range"] = list(hull.time_bounds(report[key]))
    report["ranges"] = {**out, **{p: {"kind": Kind(arch, p, "").key, **r.to_json()} for p, r in used.items()},
                        "figures": {"phases": list(phases), "residual_low": low, "residual_high": high,
                                    "rule": _rule(phases, arch)}}
    return report


def merged(slowest: dict, step_time_s: float) -> dict:
    """A multi-rank report's ranges (plan/distributed/_merge.py): the slowest rank's kind and basis, and
    its step time (the job's pace) bounded by the same hull; {} when that rank's report has none."""
    ranges = slowest.get("ranges")
    if not ranges:
        return {}
    out = {"ranges": ranges}
    if "figures" in ranges:
        hull = Range(ranges["figures"]["residual_low"], ranges["figures"]["residual_high"], (), "", "")
        out["step_time_s_range"] = list(hull.time_bounds(step_time_s))
        out["estimated_total_s_range"] = slowest.get("estimated_total_s_range")
    return out
