"""The figures of the full-size plans docs/plan.md shows, as one table: peak HBM per core, step
time or TTFT/TPOT, throughput, MFU and FLOPs per core, and the calibrated 80% range of each headline figure.

Each plan runs `python -m torch_neuronx.plan ...` in a fresh process (a dry run at full size, minutes
each on a 2-core host) and writes its JSON report into `--out`; the table is printed from those
reports. `--compare DIR` prints a second folder's reports next to them (for example the same plans
made by an earlier version of the code), with `same` or the ratio per figure: a change that should
leave the plans alone must print `same` everywhere.

    python benchmarks/plan_figures.py --out /tmp/figs                      # plan and print
    python benchmarks/plan_figures.py --out /tmp/figs --skip-planning --compare /tmp/old-figs

Plans are reproducible: the planner runs each plan with PYTHONHASHSEED=0 unless one is set.
Never asserts; exit 0.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

QWEN3_27B = ["--config", "examples/configs/qwen3-27b-tp", "--instance", "trn2.48xlarge", "--tp", "32",
             "--input-tokens", "512", "--output-tokens", "16"]
QWEN3_8B = ["--config", "examples/configs/qwen3-8b", "--instance", "trn2.48xlarge"]
PLANS = {
    "generate-eager-tp32": ["generate", *QWEN3_27B, "--mode", "eager"],
    "train-fsdp32-dp2": ["train", *QWEN3_8B, "--fsdp", "32", "--dp", "2", "--seq-len", "2048", "--micro-batch", "1"],
    "train-tp4-fsdp8-dp2-ckpt": ["train", *QWEN3_8B, "--tp", "4", "--fsdp", "8", "--dp", "2", "--micro-batch", "4",
                                "--global-batch", "256", "--seq-len", "2048", "--gradient-checkpointing"],
    "generate-deployed-tp32": ["generate", *QWEN3_27B],
}
FIGURES = ("peak_hbm_bytes_per_core", "step_time_s", "ttft_ms", "tpot_ms", "tokens_per_s", "output_tokens_per_s",
           "mfu", "flops_per_core")
# each headline figure's calibrated 80% range ([low, high], plan/_report_ranges.py), printed after the figures
RANGES = tuple(f"{k}_range" for k in ("step_time_s", "ttft_ms", "tpot_ms", "tokens_per_s", "output_tokens_per_s"))


def plan(name: str, out: str) -> None:
    report = os.path.join(out, f"{name}.json")
    cmd = [sys.executable, "-m", "torch_neuronx.plan", *PLANS[name], "--quiet", "--json", report]
    print("$", " ".join(cmd[1:]), file=sys.stderr)
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if p.returncode != 0:
        print(f"{name}: the plan failed (exit {p.returncode}):\n{p.stderr[-2000:]}", file=sys.stderr)


def figures(folder: str, name: str) -> dict | None:
    path = os.path.join(folder, f"{name}.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        report = json.load(f)
    return {k: report[k] for k in FIGURES + RANGES if report.get(k) is not None}


def compared(a, b) -> str:
    if b is None:
        return "-"
    if a == b:
        return "same"
    if isinstance(a, list) or isinstance(b, list):
        return "changed"
    return f"x{b / a:.4f}" if a else "changed"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="folder for the JSON reports")
    p.add_argument("--plans", default=",".join(PLANS), help="comma-separated names (default: all)")
    p.add_argument("--skip-planning", action="store_true", help="print the reports already in --out")
    p.add_argument("--compare", default=None, help="a folder of the same reports to print next to them")
    args = p.parse_args(argv)
    names = [n for n in args.plans.split(",") if n]
    unknown = [n for n in names if n not in PLANS]
    if unknown:
        p.error(f"--plans: unknown {unknown}; choose from {list(PLANS)}")
    os.makedirs(args.out, exist_ok=True)
    if not args.skip_planning:
        for name in names:
            plan(name, args.out)
    header = ["plan", "figure", args.out] + ([args.compare, "compared"] if args.compare else [])
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name in names:
        mine = figures(args.out, name)
        other = figures(args.compare, name) if args.compare else None
        if mine is None:
            print(f"| {name} | (no report) |" + " |" * (len(header) - 2))
            continue
        for key, value in mine.items():
            row = [name, key, repr(value)]
            if args.compare:
                theirs = None if other is None else other.get(key)
                row += [repr(theirs), compared(theirs, value) if theirs is not None else "-"]
            print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
