"""How Transformers NeuronX's published TTFT outgrows the plan as the prompt grows.

For every Transformers NeuronX TTFT row of the calibration table (torch_neuronx/plan/calibration/)
it prints the published and planned TTFT and the gap between them per attention score element of
one core: layers x attention heads per core (after padding to a multiple of TP) x batch x prompt^2.
Reads the planned cache only (no planning, a second or two):

    python benchmarks/calibration_prompt_gap.py

A gap that stays near one figure per score element across models, batches and prompt lengths is a
cost proportional to the attention score matrix that the plan does not charge (the planner's
attention keeps the scores on chip, as flash attention does). docs/calibration.md quotes it.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from torch_neuronx.plan import calibrate  # noqa: E402

STACK = "Transformers NeuronX"
LONG = 2048   # prompts from this length are the "long" ones docs/calibration.md groups


def score_elements_per_core(row: calibrate.Row, arch: dict, report: dict) -> float:
    """layers x heads per core x batch x prompt^2: the entries of the causal score matrices one core
    would write if it materialised them (both triangles, as a dense QK^T does)."""
    heads = (report.get("attention_heads_padded") or {}).get("padded_to", arch["num_attention_heads"])
    return arch["num_hidden_layers"] * heads / row.tp * row.batch * row.input_tokens ** 2


def gaps(rows, cache: dict, models: dict) -> list[dict]:
    found = []
    for row in rows:
        if STACK not in row.release or row.metric != "ttft_ms" or row.excluded:
            continue
        entry = cache.get(row.layout_key())
        planned = calibrate.planned_figure(row, entry)
        if planned is None:
            continue
        elements = score_elements_per_core(row, models[row.model], entry["report"])
        found.append({"id": row.id, "prompt": row.input_tokens, "batch": row.batch,
                      "published_ms": row.published, "planned_ms": planned,
                      "ratio": planned / row.published, "elements": elements,
                      "gap_ns_per_element": (row.published - planned) * 1e6 / elements})
    return sorted(found, key=lambda g: (g["prompt"], g["id"]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cache", type=Path, default=calibrate.CACHE, help="the planned layouts (JSON)")
    args = p.parse_args(argv)
    found = gaps(calibrate.load_rows(), calibrate.load_cache(args.cache), calibrate.load_models())
    if not found:
        print(f"no planned {STACK} TTFT rows in {args.cache} (--cache): plan them with "
              f"`python -m torch_neuronx.plan.calibrate --plan-missing --cache {args.cache}`", file=sys.stderr)
        return 1
    print("| row | prompt | batch | published ms | planned ms | planned/published | score elements per core "
          "| gap ns per element |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for g in found:
        print(f"| {g['id']} | {g['prompt']} | {g['batch']} | {g['published_ms']:.1f} | {g['planned_ms']:.1f} "
              f"| {g['ratio']:.2f} | {g['elements']:.3g} | {g['gap_ns_per_element']:.3f} |")
    long = [g["gap_ns_per_element"] for g in found if g["prompt"] >= LONG]
    print(f"\nprompts of {LONG} tokens or more: {len(long)} rows, gap per score element per core "
          f"{min(long):.3f} to {max(long):.3f} ns, median {statistics.median(long):.3f} ns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
