"""The calibrated 80% range of `plan serve`'s figures.

A served figure is not one graph's time: queueing, batching and preemption sit between the graphs
and a request's TTFT. So the range is not a factor applied to the figure; the same requests go through
vLLM's scheduler twice more, once with every prefill graph at the fast end of the prefill kind's
calibrated range and every decode graph at the fast end of the decode kind's, once with both at the
slow ends, and each figure's range is what those two runs give. The kinds are `plan generate`'s
deployed ones (dense or MoE, NxD Inference's stack: vLLM Neuron runs NxD Inference's compiled
graphs), read from calibration/ranges.json through plan/_report_ranges.py; the engine's host time per
step is not scaled (it is a measured constant, not the cost model's estimate).
"""
from __future__ import annotations

import math

from .._ranges import Kind, Range, is_moe

PHASES = {"cte": "prefill", "tkg": "decode"}
STACK = "nxd-inference"
# bench serve's figures that take a range: latencies (ms) and rates
LATENCIES = tuple(f"{stat}_{name}_ms" for name in ("ttft", "tpot", "itl", "e2el") for stat in ("mean", "median", "p90", "p99"))
RATES = ("request_throughput", "output_throughput", "total_token_throughput")


def kind_ranges(config_dict: dict, table: dict) -> dict[str, tuple[Kind, Range]]:
    """{"cte"/"tkg": (kind, range)} for a model config; {} when the install has no calibration ranges."""
    if not table:
        return {}
    arch = "moe" if is_moe(config_dict) else "dense"
    found = {}
    for graph, phase in PHASES.items():
        kind = Kind(arch, phase, STACK)
        entry = table["kinds"].get(kind.key) or table["kinds"].get(Kind(arch, phase, "").key)
        if entry:
            found[graph] = (kind, Range.from_json(entry))
    return found if len(found) == len(PHASES) else {}


def factors(ranges: dict[str, tuple[Kind, Range]], end: str) -> dict[str, float]:
    """actual / planned time of each graph kind at the `end` ("fast" or "slow") of its range: a range's
    residuals are log(planned / actual)."""
    return {graph: math.exp(-(rng.high if end == "fast" else rng.low)) for graph, (_, rng) in ranges.items()}


def attach(report: dict, ranges: dict[str, tuple[Kind, Range]], fast: dict, slow: dict, coverage: float) -> None:
    """`<figure>_range: [low, high]` beside each of bench serve's latencies and rates, from the runs at
    the fast and slow ends, and `ranges` (per phase: kind, rows, rule) as plan generate's reports carry it."""
    bench = report["bench_serve"]
    for key in (*LATENCIES, *RATES):
        if key in bench and key in fast and key in slow:
            bench[f"{key}_range"] = sorted([fast[key], slow[key]])
    report["ranges"] = {"coverage": coverage, "assumptions": "default",
                        "rule": "the same requests served again with every graph at the fast and at the slow end of "
                                "its kind's range (the engine's host time unscaled)",
                        **{PHASES[g]: {"kind": kind.key, **rng.to_json()} for g, (kind, rng) in ranges.items()}}
    if report.get("assumptions_overridden"):
        report["ranges"]["assumptions"] = ("overridden: the ranges were calibrated with the default assumptions, "
                                           "so they do not hold for this plan's")

