"""How far to trust the plans: published Trainium results against the planner's figure for the same layout.

    python -m torch_neuronx.plan.calibrate                 # the table, from the cached plans
    python -m torch_neuronx.plan.calibrate --plan-missing  # plan the rows not cached yet
    python -m torch_neuronx.plan.calibrate --recompute     # re-plan every row (slow: full size)
    python -m torch_neuronx.plan.calibrate --rows ID,ID --json out.json
    python -m torch_neuronx.plan.calibrate --exclude 'REGEX'      # leave matching row ids out
    python -m torch_neuronx.plan.calibrate --test-rows 'REGEX'    # fit without those rows, report them as a test set

Rows (calibration/published.csv) are public results with their source and release; model
architectures (calibration/models.json) are the models' public config.json figures. Each distinct
layout is planned once with `python -m torch_neuronx.plan generate|train` (a dry run at full size,
default assumptions) and cached in calibration/planned.json with the planner's refusal when it
refuses the layout. The table gives planned / published per row (a time ratio: above 1 the planner
is slower than Trainium), the median |log ratio| and the share of rows within 1.25x and 1.5x.

Fitted constants, each a named assumption with a physical meaning, never per model or layout:
matmul_efficiency (the fraction of TensorEngine peak real kernels sustain), hbm_efficiency (the
fraction of HBM bandwidth) and reduction_launch_s (the fixed start-up of a collective that
reduces: all-reduce, reduce-scatter). Each row is re-timed from its plan's roofline terms (the
graph the metric measures: the CTE for TTFT, the TKG for TPOT, the step for training;
estimate/roofline.py) as the planner would time it with other efficiencies; a start-up moves the
planned time by its change times the graph's reducing collectives. The three are fitted together
to put the most rows within 1.25x, and among those settings the least sum of |log ratio|;
leave-one-out figures refit without the row they predict, and the command prints the most rows
any one setting reaches beside the goal. The fitted values are reported with the setting that plans with them, not
applied. See docs/calibration.md.

Every plan's headline figures carry an 80% range from the residuals of their kind of workload
(plan/_ranges.py): the command prints each kind's range and leave-one-out coverage, and, run over
every row, writes them to calibration/ranges.json, which plans read.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..runtime.units import markdown_table, seconds
from ..estimate.collectives import REDUCING
from ._ranges import CONFIDENT_ROWS, PHASES, RANGES, Kind, is_moe, ranges_table, stack_of

HERE = Path(__file__).resolve().parent / "calibration"
ROWS = HERE / "published.csv"
MODELS = HERE / "models.json"
CACHE = HERE / "planned.json"

# metric -> (the plan report's key, how a planned figure compares: "time" or "rate")
METRICS = {
    "ttft_ms": ("ttft_ms", "time"),
    "tpot_ms": ("tpot_ms", "time"),
    "sequences_per_s": ("sequences_per_s", "rate"),
}


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
    plan_flags: str = ""    # planner flags the source's configuration needs (its notes say why)

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
                f"input={self.input_tokens} output={self.output_tokens} seq={self.seq_len}"
                + (f" {self.plan_flags}" if self.plan_flags else ""))


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
                            r["notes"], r.get("plan_flags") or ""))
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
    # the deployed plan compiles one CTE and one TKG step over a static cache of the source's
    # sequence length (what the decode step attends), so the whole generation costs no more to plan
    return ["generate", *common, "--batch", str(row.batch), "--input-tokens", str(row.input_tokens),
            "--output-tokens", str(row.output_tokens), "--max-model-len", str(row.seq_len),
            *shlex.split(row.plan_flags)]


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
                                       "mfu", "fits", "oom", "time_breakdown_s", "roofline", "collectives",
                                       "parameters", "world_size", "host_step_s",
                                       "attention_heads_padded", "vocab_padded")}
    if report.get("graphs"):   # per graph (CTE, TKG): its time by category and its collectives
        keep["graphs"] = {name: {k: g.get(k) for k in ("seconds", "time_breakdown_s", "roofline", "collectives")}
                          for name, g in report["graphs"].items()}
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


LATENCY = "reduction_launch_s"     # the fixed start-up of a reducing collective, fitted on every row


@dataclass(frozen=True)
class Observed:
    """A compared row and what of its planned time each constant moves."""
    row: Row
    ratio: float             # planned / published, as times
    roofline: tuple          # the planned graph's or step's time as roofline terms (estimate/roofline.py parse)
    collectives: int = 0     # reducing collectives in that graph or step
    seconds: float = 0.0     # that graph's or step's planned time
    host_s: float = 0.0      # the host's share of a serving step (serving_host_step_s): no constant moves it


EFFICIENCIES = ("matmul_efficiency", "hbm_efficiency")


def _predict(o: Observed, defaults, values: dict):
    """`o`'s time ratio with the constants at `values` (the defaults where absent; one of them may
    be a numpy array of candidates, the result is then an array): each op and kernel of the plan
    re-timed from its roofline terms, and each reducing collective's start-up moved by the change in
    reduction_launch_s."""
    import numpy as np

    from ..estimate.roofline import seconds_at

    value = {n: np.asarray(values.get(n, getattr(defaults, n)), dtype=float) for n in (*EFFICIENCIES, LATENCY)}
    scale = [getattr(defaults, n) / value[n] for n in EFFICIENCIES]
    ratio = o.ratio * (seconds_at(o.roofline, *scale) + o.host_s) / (seconds_at(o.roofline, 1.0, 1.0) + o.host_s)
    if o.collectives and o.seconds > 0:
        ratio = ratio + o.ratio * o.collectives * (value[LATENCY] - getattr(defaults, LATENCY)) / (o.seconds + o.host_s)
    return ratio


def predicted(o: Observed, defaults, values: dict) -> float:
    """`o`'s time ratio with the constants at `values` (_predict)."""
    return float(_predict(o, defaults, values))


MIN_ROWS_TO_FIT = 3     # fewer rows than this leave a constant at its default (reported as such)
GOAL = 0.8              # rows within TOLERANCE leave-one-out the calibration aims for
TOLERANCE = 1.25        # a row is "within" when planned / published is within this factor either way
GRIDS = {"matmul_efficiency": [0.05 + 0.0025 * k for k in range(381)],      # 0.05 .. 1.0
         "hbm_efficiency": [0.05 + 0.0025 * k for k in range(381)],
         LATENCY: [0.5e-6 * k for k in range(601)]}                          # 0 .. 300 us
BEST_GRID = {   # coarse: every combination is tried (fit_values, best_within)
             "matmul_efficiency": [0.05 + 0.025 * k for k in range(39)],    # 0.05 .. 1.0
             "hbm_efficiency": [0.05 + 0.025 * k for k in range(39)],
             LATENCY: [5e-6 * k for k in range(31)]}                          # 0 .. 150 us


def _informs(o: Observed, name: str) -> bool:
    """Does the row's planned time depend on constant `name`?"""
    if name == LATENCY:
        return o.collectives > 0 and o.seconds > 0
    from ..estimate.assumptions import DEFAULTS

    return abs(predicted(o, DEFAULTS, {name: getattr(DEFAULTS, name) * 0.9}) - o.ratio) > 1e-9 * o.ratio


def _scan(observed: list[Observed], defaults, values: dict, candidates: dict):
    """(rows within the tolerance, sum of |log ratio|) over `observed` for every combination of
    `candidates` (numpy arrays that broadcast against each other), the other constants at `values`."""
    import numpy as np

    within, lad = 0, 0
    for o in observed:
        r = _predict(o, defaults, {**values, **candidates})
        logs = np.where(r > 0, np.abs(np.log(np.where(r > 0, r, 1.0))), np.inf)
        within = within + (logs <= math.log(TOLERANCE) + 1e-12)
        lad = lad + logs
    return within, lad


def _best(within, lad) -> tuple:
    """The index of the most rows within, the least sum of |log ratio| among those."""
    import numpy as np

    within, lad = np.broadcast_arrays(within, lad)
    ranked = np.where(within == within.max(), lad, np.inf)
    return np.unravel_index(int(np.argmin(ranked)), ranked.shape)


def fit_values(observed: list[Observed], defaults) -> dict:
    """The constants that put the most of `observed` within 1.25x, and among those the least sum of
    |log ratio| (the table's goal is the share within 1.25x; rows the model cannot explain then move
    the fit no more than they must): the best of a coarse grid of all three (BEST_GRID), refined one
    constant at a time on its fine grid (GRIDS). A constant fewer than MIN_ROWS_TO_FIT rows inform
    stays at its default."""
    import numpy as np

    names = [n for n in GRIDS if sum(_informs(o, n) for o in observed) >= MIN_ROWS_TO_FIT]
    values = {n: getattr(defaults, n) for n in GRIDS}
    axes = [np.asarray(BEST_GRID[n] if n in names else [values[n]]) for n in GRIDS]
    shaped = {n: ax.reshape([-1 if i == k else 1 for k in range(len(axes))]) for i, (n, ax) in enumerate(zip(GRIDS, axes))}
    index = _best(*_scan(observed, defaults, values, shaped))
    values.update({n: float(ax[i]) for n, ax, i in zip(GRIDS, axes, index)})
    for _ in range(10):
        before = dict(values)
        for name in names:
            grid = np.asarray(GRIDS[name])
            values[name] = float(grid[_best(*_scan(observed, defaults, values, {name: grid}))[0]])
        if values == before:
            break
    return values


def fit(observed: list[Observed], defaults) -> dict:
    """Per constant: its default, fitted value and the rows that inform it; per row: its ratio with
    the fitted constants and leave-one-out (the constants refitted without the row)."""
    values = fit_values(observed, defaults)
    constants = {n: {"default": getattr(defaults, n), "fitted": values[n],
                     "rows": sum(_informs(o, n) for o in observed)} for n in GRIDS}
    per_row = {}
    for i, o in enumerate(observed):
        loo = fit_values(observed[:i] + observed[i + 1:], defaults)
        per_row[o.row.id] = {"fitted": predicted(o, defaults, values),
                             "leave_one_out": predicted(o, defaults, loo), "fitted_value_loo": loo}
    return {"constants": constants, "rows": per_row}


def best_within(observed: list[Observed], defaults) -> tuple[float, dict]:
    """(the largest share of `observed` rows any one setting of the three constants puts within
    1.25x either way, over BEST_GRID; a setting that reaches it): what the table can reach with
    these constants, the bound for its goal."""
    import numpy as np

    if not observed:
        return 0.0, {}
    axes = [np.asarray(BEST_GRID[n]) for n in GRIDS]
    shaped = {n: ax.reshape([-1 if i == k else 1 for k in range(len(axes))]) for i, (n, ax) in enumerate(zip(GRIDS, axes))}
    within, lad = np.broadcast_arrays(*_scan(observed, defaults, {}, shaped))
    index = _best(within, lad)
    return float(within[index] / len(observed)), {n: float(ax[i]) for n, ax, i in zip(GRIDS, axes, index)}


def host_share(row: Row, report: dict) -> float:
    """The host's share of the serving step the row's metric measures (a deployed plan's
    `host_step_s`, added to each CTE and TKG step); 0 for training rows."""
    return (report.get("host_step_s") or 0.0) if row.metric in ("ttft_ms", "tpot_ms") else 0.0


def _phase(row: Row, report: dict) -> tuple[dict | None, int, float, tuple | None]:
    """(time by category, reducing collectives, seconds, roofline terms) of the part of the plan the
    row's metric measures: the CTE graph for TTFT, the TKG graph for TPOT, the step for training."""
    from ..estimate.roofline import parse

    graph = {"ttft_ms": "context_encoding", "tpot_ms": "token_generation"}.get(row.metric)
    part = (report.get("graphs") or {}).get(graph) or report
    breakdown = part.get("time_breakdown_s")
    count = sum(c.get("count", 0) for kind, c in (part.get("collectives") or {}).items() if kind in REDUCING)
    roofline = parse(part["roofline"]) if part.get("roofline") else None
    return breakdown, count, sum((breakdown or {}).values()), roofline


# ---- the command --------------------------------------------------------------------------------

def load_cache(path: Path = CACHE) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def residuals(observed: list[Observed], models: dict) -> dict:
    """{row id: (its kind, log of its default time ratio)}: what the ranges are read from."""
    return {o.row.id: (Kind("moe" if is_moe(models.get(o.row.model, {})) else "dense", PHASES[o.row.metric],
                            stack_of(o.row.release)), math.log(o.ratio)) for o in observed}


def test_set(observed: list[Observed], test: re.Pattern, defaults) -> dict:
    """The rows whose id matches `test` predicted by the constants fitted on the others."""
    train = [o for o in observed if not test.search(o.row.id)]
    held = [o for o in observed if test.search(o.row.id)]
    values = fit_values(train, defaults)
    ratios = {o.row.id: predicted(o, defaults, values) for o in held}
    return {"rows": [{"id": o.row.id, "default": o.ratio, "fitted_on_others": ratios[o.row.id]} for o in held],
            "constants": values, "default": summary([o.ratio for o in held]),
            "fitted_on_others": summary(list(ratios.values())), "training_rows": len(train)}


def build(rows: list[Row], cache: dict, test: re.Pattern | None = None) -> dict:
    from ..estimate.assumptions import DEFAULTS

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
            _, count, seconds, roofline = _phase(row, entry["report"])
            if roofline is None:
                line["status"] = "the plan has no roofline terms (re-plan it: --recompute --rows)"
                line["ratio"] = None
                table.append(line)
                continue
            usable.append(Observed(row, line["ratio"], roofline, count, seconds, host_share(row, entry["report"])))
        table.append(line)
    fitted = fit(usable, DEFAULTS)
    for line in table:
        line.update({k: fitted["rows"].get(line["id"], {}).get(k) for k in ("fitted", "leave_one_out")})
    for c in fitted["constants"].values():
        c["note"] = "" if c["rows"] >= MIN_ROWS_TO_FIT else f"not fitted: {c['rows']} rows, {MIN_ROWS_TO_FIT} needed"
    table_of_residuals = residuals(usable, load_models())
    return {"rows": table, "constants": fitted["constants"],
            "ranges": ranges_table(table_of_residuals) if len(usable) >= CONFIDENT_ROWS else None,
            "test_set": test_set(usable, test, DEFAULTS) if test else None,
            "default": summary([o.ratio for o in usable]),
            "fitted": summary([fitted["rows"][o.row.id]["fitted"] for o in usable]),
            "leave_one_out": summary([fitted["rows"][o.row.id]["leave_one_out"] for o in usable]),
            **dict(zip(("best_within_1.25x", "best_setting"), best_within(usable, DEFAULTS))),
            "rows_total": len(rows), "rows_compared": len(usable)}


def _f(x, fmt="{:.3g}"):
    return "" if x is None else fmt.format(x)


def _constant(name: str, value: float) -> str:
    return seconds(value) if name.endswith("_s") else f"{value:.3g}"


def assumptions_setting(result: dict) -> str:
    """The environment setting that plans with the fitted constants (docs/estimate.md, assumptions)."""
    values = ",".join(f"{n}={c['fitted']:.4g}" for n, c in result["constants"].items() if c["fitted"] != c["default"])
    return f"`TORCH_NEURONX_ESTIMATE_ASSUMPTIONS={values}`" if values else "(the fit leaves every default)"


def markdown(result: dict) -> str:
    lines = markdown_table(
        ["row", "metric", "published", "planned", "planned/published", "fitted", "leave-one-out", "status"],
        [(r["id"], r["metric"], _f(r["published"]), _f(r["planned"]), _f(r["ratio"], "{:.2f}"),
          _f(r["fitted"], "{:.2f}"), _f(r["leave_one_out"], "{:.2f}"), r["status"]) for r in result["rows"]])
    lines += [""] + markdown_table(
        ["figures", "rows", "median abs log ratio", "within 1.25x", "within 1.5x"],
        [(name, result[name]["rows"], _f(result[name]["median_abs_log_ratio"], "{:.3f}"),
          _f(result[name]["within_1.25x"], "{:.0%}"), _f(result[name]["within_1.5x"], "{:.0%}"))
         for name in ("default", "fitted", "leave_one_out")])
    lines += [""] + markdown_table(
        ["constant", "default", "fitted", "rows", "note"],
        [(name, _constant(name, c["default"]), _constant(name, c["fitted"]), c["rows"], c.get("note", ""))
         for name, c in result["constants"].items()])
    if result["rows_compared"]:
        lines.append(f"\nGoal: {GOAL:.0%} of rows within 1.25x leave-one-out; measured "
                     f"{result['leave_one_out']['within_1.25x']:.0%}. The most rows any one setting of the "
                     f"three constants puts within 1.25x: {result['best_within_1.25x']:.0%} (efficiencies in "
                     "steps of 0.025, the start-up in steps of 5 us; e.g. "
                     + ", ".join(f"{n}={_constant(n, v)}" for n, v in result["best_setting"].items())
                     + "): the bound for the goal on these rows.")
    lines.append("\nTo plan with the fitted constants: " + assumptions_setting(result))
    lines.append(f"\n{result['rows_compared']} of {result['rows_total']} rows compared; sources and releases: "
                 "torch_neuronx/plan/calibration/published.csv, docs/calibration.md.")
    return "\n".join(lines + ranges_markdown(result) + test_set_markdown(result))


def ranges_markdown(result: dict) -> list[str]:
    """Per kind of workload: its rows, its 80% range of planned / actual, and its leave-one-out coverage."""
    data = result.get("ranges")
    if not data:
        return []
    by_id = {r["id"]: r for r in result["rows"]}
    rows = []
    for key, c in data["coverage"].items():
        r = data["kinds"][key]
        default = summary([by_id[i]["ratio"] for i in r["rows"]])
        loo = summary([by_id[i]["leave_one_out"] for i in r["rows"]])
        rows.append((key, c["rows"], _f(default["median_abs_log_ratio"], "{:.3f}"), _f(default["within_1.25x"], "{:.0%}"),
                     _f(loo["within_1.25x"], "{:.0%}"),
                     f"{math.exp(r['residual_low']):.2f}-{math.exp(r['residual_high']):.2f}",
                     f"{c['inside']} of {c['rows']} ({c['coverage']:.0%})", f"{c['median_width']:.2f}x",
                     ("few rows: pooled with " + r["pooled"]) if r["pooled"] else ""))
    return ["", f"By kind (planned / published; the {data['coverage_goal']:.0%} range by plan/_ranges.py's rule; "
                "coverage: rows inside the range computed without them):", ""] + markdown_table(
        ["kind (arch/phase/stack)", "rows", "median abs log ratio", "within 1.25x", "within 1.25x leave-one-out",
         "range", "coverage (leave-one-out)", "median width", "note"], rows)


def test_set_markdown(result: dict) -> list[str]:
    t = result.get("test_set")
    if not t:
        return []
    values = ", ".join(f"{n}={_constant(n, v)}" for n, v in t["constants"].items())
    lines = ["", f"Test set: {len(t['rows'])} rows predicted by the constants fitted on the other "
                 f"{t['training_rows']} ({values}):", ""]
    lines += markdown_table(["row", "default", "fitted on the others"],
                            [(r["id"], f"{r['default']:.2f}", f"{r['fitted_on_others']:.2f}") for r in t["rows"]])
    lines += [""] + markdown_table(
        ["test set", "rows", "median abs log ratio", "within 1.25x", "within 1.5x"],
        [(name, t[name]["rows"], _f(t[name]["median_abs_log_ratio"], "{:.3f}"), _f(t[name]["within_1.25x"], "{:.0%}"),
          _f(t[name]["within_1.5x"], "{:.0%}")) for name in ("default", "fitted_on_others")])
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m torch_neuronx.plan.calibrate", description=__doc__.split("\n")[0])
    ap.add_argument("--plan-missing", action="store_true", help="plan the layouts not in the cache (full size: minutes each)")
    ap.add_argument("--recompute", action="store_true", help="re-plan every layout, replacing the cache")
    ap.add_argument("--rows", help="comma-separated row ids (default: all)")
    ap.add_argument("--exclude", metavar="REGEX", help="leave out the rows whose id matches (table and fit)")
    ap.add_argument("--test-rows", metavar="REGEX", help="fit without the rows whose id matches and report them as a test set")
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
    if args.exclude:
        try:
            pattern = re.compile(args.exclude)
        except re.error as err:
            ap.error(f"--exclude {args.exclude!r} is not a regular expression: {err}")
        rows = [r for r in rows if not pattern.search(r.id)]
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
    test = None
    if args.test_rows:
        try:
            test = re.compile(args.test_rows)
        except re.error as err:
            ap.error(f"--test-rows {args.test_rows!r} is not a regular expression: {err}")
    result = build(rows, cache, test)
    print(markdown(result))
    if result["ranges"] and not (args.rows or args.exclude) and Path(args.cache) == CACHE:
        # the ranges plans read come from every row of the shipped table, never from a subset
        RANGES.write_text(json.dumps(result["ranges"], indent=1, sort_keys=True) + "\n")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
