"""How far to trust the plans: published Trainium results against the planner's figure for the same layout.

    python -m torch_neuronx.estimate.calibrate                 # the table, from the cached plans
    python -m torch_neuronx.estimate.calibrate --plan-missing  # plan the rows not cached yet
    python -m torch_neuronx.estimate.calibrate --recompute     # re-plan every row (slow: full size)
    python -m torch_neuronx.estimate.calibrate --rows ID,ID --json out.json

Rows (calibration/published.csv) are public results with their source and release; model
architectures (calibration/models.json) are the models' public config.json figures. Each distinct
layout is planned once with `python -m torch_neuronx.plan generate|train` (a dry run at full size,
default assumptions) and cached in calibration/planned.json with the planner's refusal when it
refuses the layout. The table gives planned / published per row (a time ratio: above 1 the planner
is slower than Trainium), the median |log ratio| and the share of rows within 1.25x and 1.5x.

Fitted constants, each a named assumption with a physical meaning, never per model or layout:
matmul_efficiency (the fraction of TensorEngine peak real kernels sustain) from the rows whose
time is mostly TensorEngine work (TTFT, training throughput) and hbm_efficiency (the fraction of
HBM bandwidth) from the decode rows (TPOT). A fitted value rescales only the part of the planned
time its constant bounds (the plan's time by category: matmul and attention for the TensorEngine,
every device category but collectives and launches for HBM-bound decode), as 1 / efficiency;
the value minimises the squared log ratios of its rows. Leave-one-out figures refit without the
row they predict. See docs/calibration.md.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent / "calibration"
ROWS = HERE / "published.csv"
MODELS = HERE / "models.json"
CACHE = HERE / "planned.json"

# metric -> (the plan report's key, how a planned figure compares: "time" or "rate", the constant it fits)
METRICS = {
    "ttft_ms": ("ttft_ms", "time", "matmul_efficiency"),
    "tpot_ms": ("tpot_ms", "time", "hbm_efficiency"),
    "sequences_per_s": ("sequences_per_s", "rate", "matmul_efficiency"),
}
DECODE_STEPS_PLANNED = 3     # TPOT is the mean decode step: a few steps measure it


@dataclass
class Row:
    id: str
    source: str
    release: str
    model: str
    instance: str
    nodes: int
    tp: int
    dp: int
    pp: int
    batch: int
    seq_len: int
    input_tokens: int | None
    output_tokens: int | None
    metric: str
    published: float
    notes: str

    @property
    def excluded(self) -> bool:
        return self.notes.startswith("excluded")

    @property
    def training(self) -> bool:
        return self.metric == "sequences_per_s"

    def layout_key(self) -> str:
        if self.training:
            return (f"train {self.model} {self.instance} nodes={self.nodes} tp={self.tp} dp={self.dp} "
                    f"pp={self.pp} global_batch={self.batch} seq={self.seq_len} zero1={'ZeRO-1' in self.notes} "
                    f"checkpointing={'checkpointing' in self.notes}")
        return (f"generate {self.model} {self.instance} nodes={self.nodes} tp={self.tp} batch={self.batch} "
                f"input={self.input_tokens}")


def load_rows(path: Path = ROWS) -> list[Row]:
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["metric"] not in METRICS:
                raise ValueError(f"{path}: row {r['id']}: metric {r['metric']!r} is not one of {', '.join(METRICS)}")
            num = (lambda v: int(v) if v not in ("", None) else None)
            rows.append(Row(r["id"], r["source"], r["release"], r["model"], r["instance"], int(r["nodes"]),
                            int(r["tp"]), int(r["dp"]), int(r["pp"]), int(r["batch"]), int(r["seq_len"]),
                            num(r["input_tokens"]), num(r["output_tokens"]), r["metric"], float(r["published"]),
                            r["notes"]))
    return rows


def load_models(path: Path = MODELS) -> dict:
    return {k: v for k, v in json.loads(Path(path).read_text()).items() if not k.startswith("_")}


def _config_dir(arch: dict, where: str) -> str:
    """A config.json of the architecture, built by transformers' own config class."""
    from transformers import AutoConfig

    fields = {k: v for k, v in arch.items() if k not in ("source", "model_type")}
    AutoConfig.for_model(arch["model_type"], **fields).save_pretrained(where)
    return where


def plan_argv(row: Row, config_dir: str, out: str) -> list[str]:
    """The planner command line that stands for `row`'s layout."""
    common = ["--config", config_dir, "--instance", row.instance, "--nodes", str(row.nodes),
              "--tp", str(row.tp), "--json", out]
    if row.training:
        argv = ["train", *common, "--pp", str(row.pp), "--micro-batch", "1", "--global-batch",
                str(row.batch), "--seq-len", str(row.seq_len)]
        if "ZeRO-1" in row.notes:
            argv += ["--dp", str(row.dp), "--zero1"]
        if "checkpointing" in row.notes:
            argv.append("--gradient-checkpointing")
        return argv
    return ["generate", *common, "--batch", str(row.batch), "--input-tokens", str(row.input_tokens),
            "--output-tokens", str(DECODE_STEPS_PLANNED)]


def plan_row(row: Row, models: dict, *, timeout: float = 1800.0, env: dict | None = None) -> dict:
    """Plan `row`'s layout in a fresh process: {"report": {...}} or {"refused": "the planner's reason"}."""
    if row.model not in models:
        raise ValueError(f"row {row.id}: model {row.model!r} is not in {MODELS.name}; add its config figures there")
    run_env = {k: v for k, v in (env or os.environ).items()
               if k not in ("TORCH_NEURONX_INSTANCE_TYPE", "NEURON_LOGICAL_NC_CONFIG", "TORCH_NEURONX_DRY_RUN")}
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "plan.json")
        argv = plan_argv(row, _config_dir(models[row.model], tmp), out)
        t0 = time.perf_counter()
        try:
            p = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", *argv], env=run_env,
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"refused": f"planning took over {timeout:.0f} s", "argv": argv}
        wall = time.perf_counter() - t0
        if p.returncode != 0 or not os.path.exists(out):
            return {"refused": _reason(p.stderr or p.stdout, p.returncode), "argv": argv,
                    "planning_wall_s": wall}
        report = json.loads(Path(out).read_text())
    keep = {k: report.get(k) for k in ("ttft_ms", "tpot_ms", "sequences_per_s", "tokens_per_s", "step_time_s",
                                       "mfu", "fits", "oom", "time_breakdown_s", "parameters", "world_size")}
    return {"report": keep, "argv": argv, "planning_wall_s": wall}


def _reason(text: str, code: int) -> str:
    """The planner's message: its `error:` line, else the exception line of a traceback."""
    if code < 0:
        return f"the planner was killed by signal {-code} (out of host memory?): plan this row alone"
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "error:" in ln or re.match(r"^[\w.]+(Error|Exception|Exit)\b", ln):
            return ln[:500]
    return (lines[-1][:500] if lines else "") or f"exit status {code}"


def planned_figure(row: Row, entry: dict | None) -> float | None:
    if not entry or "report" not in entry:
        return None
    value = entry["report"].get(METRICS[row.metric][0])
    return float(value) if value else None


def time_ratio(row: Row, planned: float) -> float:
    """planned / published as times: > 1 means the plan is slower than the published result."""
    kind = METRICS[row.metric][1]
    return planned / row.published if kind == "time" else row.published / planned


# ---- statistics ---------------------------------------------------------------------------------

def summary(ratios: list[float]) -> dict:
    """Median |log ratio| and the shares within 1.25x and 1.5x (either way)."""
    if not ratios:
        return {"rows": 0, "median_abs_log_ratio": None, "within_1.25x": None, "within_1.5x": None}
    logs = [abs(math.log(r)) for r in ratios]
    return {"rows": len(ratios), "median_abs_log_ratio": statistics.median(logs),
            "within_1.25x": sum(x <= math.log(1.25) + 1e-12 for x in logs) / len(logs),
            "within_1.5x": sum(x <= math.log(1.5) + 1e-12 for x in logs) / len(logs)}


_BOUND = {   # the plan's time categories each constant bounds (see the module docstring)
    "matmul_efficiency": lambda cat: cat in ("matmul", "attention", "graph"),
    "hbm_efficiency": lambda cat: not (cat.startswith("collective") or cat == "launch"),
}


def bound_share(constant: str, breakdown: dict | None) -> float:
    """The share of a plan's time its constant bounds (1 when the plan gives no breakdown)."""
    if not breakdown:
        return 1.0
    total = sum(breakdown.values())
    return sum(v for k, v in breakdown.items() if _BOUND[constant](k)) / total if total > 0 else 1.0


def rescaled(ratio: float, share: float, default: float, value: float) -> float:
    """A row's time ratio with its constant at `value` instead of `default`."""
    return ratio * (1 - share + share * default / value)


MIN_ROWS_TO_FIT = 3     # fewer rows than this leave a constant at its default (reported as such)


def fit_value(items: list[tuple[float, float]], default: float) -> float:
    """The efficiency in (0.05, 1] minimising the squared log ratios of (ratio, share) rows; the
    default when there are fewer than MIN_ROWS_TO_FIT rows."""
    if len(items) < MIN_ROWS_TO_FIT:
        return default
    grid = [0.05 + 0.0025 * k for k in range(381)]       # 0.05 .. 1.0
    return min(grid, key=lambda v: sum(math.log(rescaled(r, s, default, v)) ** 2 for r, s in items))


def fit(rows_ratios: list[tuple["Row", float, float]], defaults) -> dict:
    """rows_ratios: (row, ratio, share of its time its constant bounds). Per constant: the fitted
    value; per row: its fitted and leave-one-out ratio."""
    by_constant: dict[str, list] = {}
    for row, r, share in rows_ratios:
        by_constant.setdefault(METRICS[row.metric][2], []).append((row, r, share))
    constants, per_row = {}, {}
    for name, items in by_constant.items():
        default = getattr(defaults, name)
        value = fit_value([(r, s) for _, r, s in items], default)
        constants[name] = {"default": default, "fitted": value, "rows": len(items)}
        for i, (row, r, s) in enumerate(items):
            loo = fit_value([(x, y) for j, (_, x, y) in enumerate(items) if j != i], default)
            per_row[row.id] = {"fitted": rescaled(r, s, default, value),
                               "leave_one_out": rescaled(r, s, default, loo), "fitted_value_loo": loo}
    return {"constants": constants, "rows": per_row}


# ---- the command --------------------------------------------------------------------------------

def load_cache(path: Path = CACHE) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def build(rows: list[Row], cache: dict) -> dict:
    from ._assumptions import DEFAULTS

    table, usable = [], []
    for row in rows:
        entry = cache.get(row.layout_key())
        planned = planned_figure(row, entry)
        line = {"id": row.id, "model": row.model, "instance": row.instance, "layout":
                f"nodes={row.nodes} TP={row.tp} DP={row.dp} PP={row.pp} batch={row.batch} "
                + (f"seq={row.seq_len}" if row.training else f"in={row.input_tokens} out={row.output_tokens}"),
                "metric": row.metric, "published": row.published, "planned": planned, "ratio": None,
                "source": row.source, "release": row.release, "status": "ok"}
        if row.excluded:
            line["status"] = row.notes
        elif entry is None:
            line["status"] = "not planned yet (--plan-missing)"
        elif "refused" in entry:
            line["status"] = "planner refused: " + entry["refused"]
        elif planned is None:
            line["status"] = "the plan has no figure (out of memory?)"
        else:
            line["ratio"] = time_ratio(row, planned)
            share = bound_share(METRICS[row.metric][2], entry["report"].get("time_breakdown_s"))
            usable.append((row, line["ratio"], share))
        table.append(line)
    fitted = fit(usable, DEFAULTS)
    for line in table:
        line.update({k: fitted["rows"].get(line["id"], {}).get(k) for k in ("fitted", "leave_one_out")})
    for c in fitted["constants"].values():
        c["note"] = "" if c["rows"] >= MIN_ROWS_TO_FIT else f"not fitted: {c['rows']} rows, {MIN_ROWS_TO_FIT} needed"
    return {"rows": table, "constants": fitted["constants"],
            "default": summary([r for _, r, _ in usable]),
            "fitted": summary([fitted["rows"][row.id]["fitted"] for row, _, _ in usable]),
            "leave_one_out": summary([fitted["rows"][row.id]["leave_one_out"] for row, _, _ in usable]),
            "rows_total": len(rows), "rows_compared": len(usable)}


def _f(x, fmt="{:.3g}"):
    return "" if x is None else fmt.format(x)


def markdown(result: dict) -> str:
    lines = ["| row | metric | published | planned | planned/published | fitted | leave-one-out | status |",
             "|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['id']} | {r['metric']} | {_f(r['published'])} | {_f(r['planned'])} | "
                     f"{_f(r['ratio'], '{:.2f}')} | {_f(r['fitted'], '{:.2f}')} | {_f(r['leave_one_out'], '{:.2f}')} | "
                     f"{r['status']} |")
    lines += ["", "| figures | rows | median abs log ratio | within 1.25x | within 1.5x |", "|---|---|---|---|---|"]
    for name in ("default", "fitted", "leave_one_out"):
        s = result[name]
        lines.append(f"| {name} | {s['rows']} | {_f(s['median_abs_log_ratio'], '{:.3f}')} | "
                     f"{_f(s['within_1.25x'], '{:.0%}')} | {_f(s['within_1.5x'], '{:.0%}')} |")
    lines += ["", "| constant | default | fitted | rows | note |", "|---|---|---|---|---|"]
    for name, c in result["constants"].items():
        lines.append(f"| {name} | {c['default']:.3g} | {c['fitted']:.3g} | {c['rows']} | {c.get('note', '')} |")
    lines.append(f"\n{result['rows_compared']} of {result['rows_total']} rows compared; sources and releases: "
                 "torch_neuronx/estimate/calibration/published.csv, docs/calibration.md.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m torch_neuronx.estimate.calibrate", description=__doc__.split("\n")[0])
    ap.add_argument("--plan-missing", action="store_true", help="plan the layouts not in the cache (full size: minutes each)")
    ap.add_argument("--recompute", action="store_true", help="re-plan every layout, replacing the cache")
    ap.add_argument("--rows", help="comma-separated row ids (default: all)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds allowed to plan one layout")
    ap.add_argument("--cache", default=str(CACHE), help="the cache of planned layouts (JSON)")
    ap.add_argument("--json", help="write the table and its statistics here")
    args = ap.parse_args(argv)
    rows = load_rows()
    if args.rows:
        wanted = {x.strip() for x in args.rows.split(",") if x.strip()}
        unknown = wanted - {r.id for r in rows}
        if unknown:
            ap.error(f"--rows: unknown row ids {', '.join(sorted(unknown))}; see {ROWS}")
        rows = [r for r in rows if r.id in wanted]
    cache_path = Path(args.cache)
    cache = load_cache(cache_path)
    if args.plan_missing or args.recompute:
        models = load_models()
        done: set = set()
        for row in rows:
            key = row.layout_key()
            if row.excluded or key in done or (key in cache and "report" in cache[key] and not args.recompute):
                continue      # a refused layout is tried again: the planner may plan it now
            done.add(key)
            print(f"planning {key} ...", file=sys.stderr, flush=True)
            cache[key] = plan_row(row, models, timeout=args.timeout)
            # layouts no row stands for any more (a row's layout changed) leave the cache
            current = {r.layout_key() for r in load_rows()}
            cache = {k: v for k, v in cache.items() if k in current}
            cache_path.write_text(json.dumps(cache, indent=1, sort_keys=True) + "\n")
    result = build(rows, cache)
    print(markdown(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
