"""The compile budget of a plan: what a run compiles, why, what it could avoid, what a cache serves.

Read from the compiler's record of each graph (torch_neuronx.compiler.compiled_graphs), the same records
`torch_neuronx.metrics` reports. Per graph: its function, rank and input shapes, its size (FX
nodes, FLOPs), what made it new (first call, new shape, guard failure, graph break), whether a
warm persistent cache holds it (same graph, same compiler flags), and its estimated neuronx-cc
compile time (plan/_compile_time.py, or "unknown"). Per function: the recompiles a user could
avoid and how (pad to a bucket, a static KV cache, dynamic=False / torch._dynamo.mark_static, a
smaller bucket set, drop_last). docs/compile-budget.md describes each rule.
"""
from __future__ import annotations

import math

from . import _compile_time as compile_time

BUCKET = 128   # TorchNeuron and TRL's advice: pad sequence lengths to a multiple of 128


def _graph_row(r) -> dict:
    flops = r.flops
    per_core = None if flops is None else flops * (3 if r.training else 1)   # forward + backward ~ 3x forward
    est = compile_time.estimate(per_core)
    return {"graph": r.graph_name, "function": r.function, "rank": r.rank,
            "inputs": [[list(s), d.replace("torch.", "")] for s, d in r.inputs],
            "fx_nodes": r.fx_nodes, "flops": flops, "training": r.training, "cause": r.cause,
            "detail": r.detail, "source": r.source, "warm_cache": r.warm, "key": r.key,
            "neuronx_cc": est}


def _varying(signatures: list[tuple]) -> list[tuple[int, int, list[int]]]:
    """(input, dim, sizes in call order) of each dimension that differs between the signatures."""
    out = []
    first = signatures[0]
    if any(len(s) != len(first) for s in signatures):
        return out
    for i, (shape, _dtype) in enumerate(first):
        for d in range(len(shape)):
            sizes = [s[i][0][d] if len(s[i][0]) == len(shape) else None for s in signatures]
            if None not in sizes and len(set(sizes)) > 1:
                out.append((i, d, sizes))
    return out


def _buckets(sizes, step: int) -> int:
    return len({math.ceil(s / step) * step for s in sizes})


def _pow2_buckets(sizes) -> int:
    return len({1 << max(0, math.ceil(math.log2(max(s, 1)))) for s in sizes})


def _structure(inputs) -> tuple:
    """What two calls must share for their shapes to be compared: input count, ranks and dtypes
    (a prefill and a decode step of one forward differ here, and are compared apart)."""
    return tuple((len(shape), dtype) for shape, dtype in inputs)


def _shape_fix(fn: str, records: list) -> dict | None:
    """The fix for a function compiled at several input shapes, when one would compile fewer graphs."""
    groups: dict = {}
    for r in records:
        groups.setdefault(_structure(r.inputs), []).append(r)
    fixes = [f for f in (_group_fix(fn, group) for group in groups.values()) if f is not None]
    return max(fixes, key=lambda f: f["graphs"] - f["graphs_after"]) if fixes else None


def _group_fix(fn: str, records: list) -> dict | None:
    signatures = []
    for r in records:
        if r.inputs not in signatures:
            signatures.append(r.inputs)
    if len(signatures) < 2:
        return None
    varying = _varying(signatures)
    if not varying:
        return None
    i, d, sizes = max(varying, key=lambda v: len(set(v[2])))
    fix = _bucket_fix(fn, signatures, i, d, sizes)
    if fix is not None:
        fix["structure"] = _structure(records[0].inputs)
    return fix


def _bucket_fix(fn: str, signatures: list, i: int, d: int, sizes: list[int]) -> dict | None:
    distinct = sorted(set(sizes))
    n = len(signatures)
    where = f"input {i} dim {d}"
    steps = [b - a for a, b in zip(sizes, sizes[1:])]
    if len(distinct) >= 3 and all(s == 1 for s in steps):
        return {"function": fn, "graphs": n, "graphs_after": 1, "varies": where, "sizes": distinct,
                "fix": "a dimension that grows by one each call (a KV cache that grows): use a static cache "
                       "(generate(..., cache_implementation='static')) so decoding is one graph"}
    if d == 0 and len(distinct) == 2 and sizes.count(min(distinct)) == 1 and sizes[-1] == min(distinct):
        return {"function": fn, "graphs": n, "graphs_after": n - 1, "varies": where, "sizes": distinct,
                "fix": "the last batch is smaller: DataLoader(drop_last=True), or pad it to the batch size"}
    after = _buckets(distinct, BUCKET)
    if after < len(distinct):
        return {"function": fn, "graphs": n, "graphs_after": n - (len(distinct) - after), "varies": where,
                "sizes": distinct,
                "fix": f"pad {where} to a multiple of {BUCKET} (TRL: SFTConfig(pad_to_multiple_of={BUCKET}); "
                       f"tokenizer(..., padding=True, pad_to_multiple_of={BUCKET}))"}
    after = _pow2_buckets(distinct)
    if len(distinct) > 4 and after < len(distinct):
        return {"function": fn, "graphs": n, "graphs_after": n - (len(distinct) - after), "varies": where,
                "sizes": distinct,
                "fix": f"a smaller bucket set: pad {where} to the next power of two ({after} buckets)"}
    return None


def _avoidable(records: list) -> tuple[list[dict], dict]:
    """The avoidable recompiles, and for each avoidable graph's index the fix that removes it."""
    fixes, by_graph = [], {}
    by_fn: dict[str, list] = {}
    for r in records:
        by_fn.setdefault(r.function, []).append(r)
    for fn, recs in by_fn.items():
        seen: dict = {}
        retraced = []
        for r in recs:
            if r.inputs in seen and r.cause == "new shape" and r.key != seen[r.inputs].key:
                retraced.append(r)
            seen.setdefault(r.inputs, r)
        if retraced:
            fix = {"function": fn, "graphs": len(recs), "graphs_after": len(recs) - len(retraced),
                   "fix": "the same shapes compiled again: after a shape changed, Dynamo's automatic dynamic shapes "
                          "traced the function with symbolic sizes; torch.compile(..., dynamic=False) or "
                          "torch._dynamo.mark_static(tensor, dim) keeps one static graph per shape"}
            fixes.append(fix)
            by_graph.update({r.index: fix["fix"] for r in retraced})
        guards = [r for r in recs if r.cause == "guard failure"]
        if guards:
            fix = {"function": fn, "graphs": len(recs), "graphs_after": len(recs) - len(guards),
                   "fix": f"recompiled for the same shapes ({guards[0].detail}): keep that Python value constant "
                          "or pass it as a tensor; torch._dynamo.mark_static where Dynamo made a size dynamic"}
            fixes.append(fix)
            by_graph.update({r.index: fix["fix"] for r in guards})
        shaped = [r for r in recs if r.cause in ("first call", "new shape") and r not in retraced]
        fix = _shape_fix(fn, shaped)
        if fix is not None:
            fixes.append(fix)
            structure = fix.pop("structure")
            group = [r for r in shaped if _structure(r.inputs) == structure]
            for r in group[1:1 + fix["graphs"] - fix["graphs_after"]]:   # the first of the group stays
                by_graph.setdefault(r.index, fix["fix"])
    return fixes, by_graph


def _invalidated_by(records: list) -> list[str]:
    flags = sorted({repr(f) for r in records for f in r.flags})
    out = ["a change of compiler flags (this run's: " + (", ".join(flags) or "none") + ")",
           "a change of torch or torch-neuronx version",
           "a new input shape or dtype (each is its own graph)",
           "a change of the model's code, config or dtype (the graph's code is in the key)"]
    collective = sum(1 for r in records if r.has_collectives)
    if collective:
        out.append(f"a change of world size or parallel layout: {collective} graph(s) hold collectives over "
                   "the current process groups")
    return out


def build(records: list) -> dict:
    """The compile budget of `records` (torch_neuronx.compiler.GraphRecord, one run's)."""
    rows = [_graph_row(r) for r in records]
    fixes, by_graph = _avoidable(records)
    for row, r in zip(rows, records):
        row["avoidable"] = by_graph.get(r.index)
    cold = [row for row in rows if not row["warm_cache"] and row["source"] != "memory cache"]
    known = [row["neuronx_cc"] for row in cold if "estimate_s" in row["neuronx_cc"]]
    unknown = len(cold) - len(known)
    total = None
    if known and not unknown:
        total = {k: sum(e[k] for e in known) for k in ("low_s", "estimate_s", "high_s")}
    return {
        "graphs": rows,
        "distinct_graphs": len({row["key"] or row["graph"] for row in rows}),
        "ranks": sorted({row["rank"] for row in rows}),
        "cold_compiles": len(cold),
        "warm_cached": sum(1 for row in rows if row["warm_cache"]),
        "avoidable_recompiles": len(by_graph),
        "avoidable": fixes,
        "neuronx_cc_total": total,
        "neuronx_cc_unknown_graphs": unknown,
        "compile_time_model": compile_time.status(),
        "invalidated_by": _invalidated_by(records),
    }


def section(start: int) -> dict:
    """The budget of the graphs compiled since the compile log held `start` records."""
    from ..compiler import compiled_graphs

    return build(compiled_graphs(start))


# ------------------------------------------------------------------------------ markdown

def _shapes(inputs) -> str:
    return ", ".join(f"{tuple(s)}" for s, _ in inputs) or "-"


def _time(est: dict) -> str:
    from ._wording import seconds

    if "estimate_s" not in est:
        return "unknown"
    return f"{seconds(est['estimate_s'])} ({seconds(est['low_s'])}-{seconds(est['high_s'])})"


HEAD = ("graph", "function", "rank", "input shapes", "FX nodes", "FLOPs", "why new", "cache", "neuronx-cc")


def _title(budget: dict) -> str:
    from ._wording import plural, seconds

    if not budget["graphs"]:   # an eager run: nothing for neuronx-cc, so no time to say unknown
        return "Compile budget: no graph compiled"
    total = budget["neuronx_cc_total"]
    when = (f"estimated neuronx-cc time {seconds(total['estimate_s'])} ({seconds(total['low_s'])}-"
            f"{seconds(total['high_s'])})" if total else
            f"neuronx-cc time unknown for {plural(budget['neuronx_cc_unknown_graphs'], 'graph')}")
    return (f"Compile budget: {plural(len(budget['graphs']), 'graph')}, {budget['cold_compiles']} to compile, "
            f"{budget['warm_cached']} in a warm cache, "
            f"{plural(budget['avoidable_recompiles'], 'avoidable recompile')}; {when}")


def table(budget: dict, limit: int | None = None) -> tuple[str, tuple, list[list[str]], list[str]]:
    """(title, header, rows, closing lines) of the budget: what the terminal and HTML reports show."""
    from ._wording import number

    rows = []
    for row in budget["graphs"][:limit]:
        why = row["cause"] + (f": {row['detail']}" if row["detail"] else "")
        cache = "warm" if row["warm_cache"] else ("memory" if row["source"] == "memory cache" else "cold")
        rows.append([row["graph"], row["function"], str(row["rank"]), _shapes(row["inputs"]), str(row["fx_nodes"]),
                     number(row["flops"]) if row["flops"] is not None else "-", why, cache, _time(row["neuronx_cc"])])
    lines = [f"avoidable in {fix['function']}: {fix['graphs']} graphs -> {fix['graphs_after']}: {fix['fix']}"
             for fix in budget["avoidable"]]
    if not budget["graphs"]:
        lines.append("nothing was compiled with torch.compile (backend neuron): the run was eager")
    lines.append("a warm cache is invalidated by: " + "; ".join(budget["invalidated_by"]))
    lines.append(f"compile-time model: {budget['compile_time_model']} (docs/compile-budget.md)")
    return _title(budget), HEAD, rows, lines


def markdown(budget: dict | None, limit: int = 20) -> list[str]:
    """The budget's lines of a plan's terminal report."""
    from ..runtime.units import markdown_table

    if not budget:
        return []
    title, head, rows, closing = table(budget, limit)
    lines = ["", f"## {title}"]
    if rows:
        lines += [""] + markdown_table(list(head), rows)
        if len(budget["graphs"]) > limit:
            lines.append(f"({len(budget['graphs']) - limit} more graphs in the JSON report)")
    return lines + [""] + [f"- {line}" for line in closing]


# ------------------------------------------------------------------------------ compile-only mode

def report_at_exit() -> None:
    """Compile-only mode (TORCH_NEURONX_COMPILE_ONLY=1): at exit, the budget of every graph the process
    compiled goes to TORCH_NEURONX_DRY_RUN_REPORT as JSON when that is set, else to stderr: the compile
    budget of a script without running its steps. Inside a dry run (`plan run` with the variable set)
    the plan's own report carries the budget, and a process that compiled nothing writes nothing."""
    import atexit

    from ..runtime import env

    if env.parse_flag(env.COMPILE_ONLY):   # a bad value raises here, named, at startup
        atexit.register(_write_budget)


def _write_budget() -> None:
    import json
    import sys

    from . import _dry_run_env as config

    budget = section(0)
    if not budget["graphs"] or config.requested_or_off():
        return   # nothing compiled (a launcher such as `plan run`'s own process), or a dry run's report has it
    path = config.report_path()
    if path:
        with open(path, "w") as f:
            json.dump({"compile_only": True, "compile_budget": budget}, f, indent=1, default=str)
    else:
        print("\n".join(["# compile-only run (TORCH_NEURONX_COMPILE_ONLY=1): nothing executed"] + markdown(budget)),
              file=sys.stderr)
