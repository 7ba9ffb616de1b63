"""The calibrated 80% range next to each headline figure of a model-level plan (`plan train`,
`plan generate`): `<figure>_range: [low, high]` in the JSON, and the text the terminal and HTML
reports show beside the figure.

The ranges come from calibration/ranges.json, which `python -m torch_neuronx.plan.calibrate`
writes from the calibration table's residuals (plan/_ranges.py: the rule, the kinds, the
leave-one-out coverage); a plan reads them, it never re-runs the calibration. A plan's kind: dense or
MoE (its config routes tokens to experts), the phase each figure measures, and the stack the planner
models: NxD Training for `plan train`, NxD Inference for `plan generate`'s deployed mode; eager
`generate()` has no calibrated stack and gets the widened range of every row. `plan run`'s figures
take the range of the kind of what its script ran (plan/_run_ranges.py); this module writes their
text and basis lines too.
"""
from __future__ import annotations

import json
import math
from functools import lru_cache

from ._ranges import RANGES, Kind, Range

# figure -> (phase whose range it takes, "time" or "rate")
FIGURES = {"ttft_ms": ("prefill", "time"), "tpot_ms": ("decode", "time"),
           "step_time_s": ("train", "time"), "tokens_per_s": ("train", "rate"), "sequences_per_s": ("train", "rate")}
# generation rates: their time is the prefill's and the decode steps' together (each part takes its range)
GENERATION_RATES = ("output_tokens_per_s", "output_tokens_per_s_all_replicas")
OVERRIDDEN = ("overridden: the ranges were calibrated with the default assumptions, "
              "so they do not hold for this plan's")


@lru_cache(maxsize=1)
def table() -> dict:
    """calibration/ranges.json ({} when this install has none: plans then carry no ranges)."""
    return json.loads(RANGES.read_text()) if RANGES.exists() else {}


def _stack(report: dict) -> str:
    if "step_time_s" in report:
        return "nxd-training"
    return "nxd-inference" if report.get("mode") == "deployed" else ""


def kind_of(report: dict, phase: str) -> Kind:
    return Kind("moe" if report.get("moe") else "dense", phase, _stack(report))


def _range(report: dict, phase: str, kinds: dict) -> Range | None:
    """The range of the report's kind; a stack the table has no row of falls back to the kind without a stack."""
    kind = kind_of(report, phase)
    entry = kinds.get(kind.key) or kinds.get(Kind(kind.arch, kind.phase, "").key)
    return Range.from_json(entry) if entry else None


def attach(report: dict, ranges: dict | None = None) -> dict:
    """Add `<figure>_range` for each headline figure the report has, and `ranges` (per phase: the
    kind, the rows it rests on, the rule); a no-op when there is no table or it is already done."""
    data = table() if ranges is None else ranges
    if not data or "ranges" in report:
        return report
    kinds, used = data["kinds"], {}
    for key, (phase, how) in FIGURES.items():
        value, rng = report.get(key), _range(report, phase, kinds)
        if value is None or rng is None:
            continue
        report[f"{key}_range"] = list(rng.time_bounds(value) if how == "time" else rng.rate_bounds(value))
        used[phase] = rng
    prefill, decode = _range(report, "prefill", kinds), _range(report, "decode", kinds)
    for key in GENERATION_RATES:
        rate = report.get(key)
        if rate and prefill and decode and report.get("ttft_ms") is not None and report.get("output_tokens_per_s"):
            report[f"{key}_range"] = list(_generation_rate_bounds(report, rate, prefill, decode))
    report["ranges"] = {"coverage": data["coverage_goal"], "assumptions": "default",
                        **{phase: {"kind": kind_of(report, phase).key, **rng.to_json()} for phase, rng in used.items()}}
    if report.get("assumptions_overridden"):
        report["ranges"]["assumptions"] = OVERRIDDEN
    return report


def _generation_rate_bounds(report: dict, rate: float, prefill: Range, decode: Range) -> tuple[float, float]:
    """A generation rate's bounds: one generation's planned time (its output tokens over the one-TP-group
    rate) split into TTFT and the rest, the decode steps; each part moved to its own range's ends."""
    total = report["batch"] * report["output_tokens"] / report["output_tokens_per_s"]
    share = min(max(report["ttft_ms"] / 1e3 / total, 0.0), 1.0)
    fastest = share * math.exp(-prefill.high) + (1 - share) * math.exp(-decode.high)   # actual / planned time
    slowest = share * math.exp(-prefill.low) + (1 - share) * math.exp(-decode.low)
    return rate / slowest, rate / fastest


# the reports' labels of the headline figures (plan/models/_cli.py, _cli_deployed.py, _html_report.py)
LABELS = {"TTFT": "ttft_ms", "per output token": "tpot_ms", "per output token (TPOT)": "tpot_ms",
          "output tokens/s (one TP group)": "output_tokens_per_s", "step time": "step_time_s",
          "tokens/s": "tokens_per_s", "sequences/s": "sequences_per_s"}
UNITS = {"ttft_ms": " ms", "tpot_ms": " ms", "step_time_s": " s"}


def key_of(label: str) -> str | None:
    """The figure a report row shows, from its label ("output tokens/s (8 replicas)": all replicas)."""
    if label in LABELS:
        return LABELS[label]
    return "output_tokens_per_s_all_replicas" if label.startswith("output tokens/s (") else None


def text(report: dict, key: str | None) -> str:
    """The range of `key` as the reports show it beside the figure ('' when the report has none)."""
    from ._wording import number, seconds

    bounds = report.get(f"{key}_range") if key else None
    if not bounds:
        return ""
    if key.endswith("_s") and report.get("kind") in ("rank", "merged"):   # `plan run`: as it shows its times
        return f" (80% range {seconds(bounds[0])} to {seconds(bounds[1])})"
    unit = UNITS.get(key) or (" ms" if key.endswith("_ms") else "")   # plan serve's bench serve figures: *_ms
    return f" (80% range {number(bounds[0], 3)}{unit} to {number(bounds[1], 3)}{unit})"


def with_ranges(report: dict, rows: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """A report's (label, value) rows with each headline figure's range appended to its value."""
    attach(report)
    return [(label, value + text(report, key_of(label)) if value != "-" else value) for label, value in rows]


def basis_lines(report: dict) -> list[str]:
    """What the ranges rest on: per phase, the kind, its calibration rows and the rule."""
    ranges = report.get("ranges")
    if not ranges:
        return []
    if ranges.get("missing"):   # `plan run` of a kind the table lacks (plan/_run_ranges.py)
        return [f"No 80% range: {ranges['missing']}."]
    lines = [f"80% ranges from the calibration table (docs/calibration.md), for the {ranges['assumptions']} assumptions:"]
    for phase in ("prefill", "decode", "train"):
        r = ranges.get(phase)
        if r:
            rows = ", ".join(r["rows"]) if r["rows"] else "none of its own"
            lines.append(f"- {phase} ({r['kind']}): {r['note']}; rows: {rows}")
    if ranges.get("figures"):   # `plan run`: which phases its figures take, and why
        lines.append(f"- {ranges['figures']['rule']}")
    return lines
