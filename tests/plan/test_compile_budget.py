"""A plan's compile budget: the graphs a run compiles, an avoidable recompile with its fix, a warm
cache serving a second run's graphs, and torch_neuronx.metrics reporting the same records."""
from __future__ import annotations

import torch

import torch_neuronx.metrics as metrics
import torch_neuronx.plan as plan
from torch_neuronx.compiler import _cache
from torch_neuronx.plan._compile_budget import _title, build


def double_then_sin(x):
    return (x * 2).sin()


def _run(sizes, compiled=None):
    f = compiled or torch.compile(double_then_sin, backend="neuron", dynamic=False)
    for n in sizes:
        f(torch.ones(n, 4, device="neuron"))
    return f


def test_a_bucketable_recompile_is_flagged_with_its_fix():
    import torch._dynamo

    torch._dynamo.reset()
    with plan.dry_run() as run:
        _run([100, 8, 200])     # padded to multiples of 128: 128, 128, 256 -> two graphs
    budget = run.report()["compile_budget"]
    graphs = budget["graphs"]
    assert [g["inputs"][0][0] for g in graphs] == [[100, 4], [8, 4], [200, 4]]
    assert [g["cause"] for g in graphs] == ["first call", "new shape", "new shape"]
    (fix,) = budget["avoidable"]
    assert fix["graphs"] == 3 and fix["graphs_after"] == 2 and "multiple of 128" in fix["fix"]
    assert budget["avoidable_recompiles"] == 1 and [g["avoidable"] is not None for g in graphs] == [False, True, False]


def test_shapes_already_in_buckets_are_not_flagged():
    import torch._dynamo

    torch._dynamo.reset()
    with plan.dry_run() as run:
        _run([128, 256, 128])
    budget = run.report()["compile_budget"]
    assert len(budget["graphs"]) == 2 and budget["avoidable"] == [] and budget["avoidable_recompiles"] == 0


def test_a_second_run_finds_the_first_runs_graphs_in_a_warm_cache(monkeypatch, tmp_path):
    import torch._dynamo

    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path))
    torch._dynamo.reset()
    _cache.clear_memory_cache()
    _run([16, 32])                       # a real run: compiles both graphs and fills the cache
    torch._dynamo.reset()
    _cache.clear_memory_cache()
    with plan.dry_run() as run:
        _run([16, 32, 48])               # the plan of a later run: one new shape
    budget = run.report()["compile_budget"]
    assert [g["warm_cache"] for g in budget["graphs"]] == [True, True, False]
    assert budget["warm_cached"] == 2 and budget["cold_compiles"] == 1


def test_metrics_report_the_budgets_graphs():
    import torch._dynamo

    torch._dynamo.reset()
    metrics.set_enabled(True)
    try:
        metrics.reset()
        with plan.dry_run() as run:
            f = torch.compile(lambda a, b: (a @ b).relu(), backend="neuron", dynamic=False)
            for n in (8, 24):
                f(torch.ones(n, 16, device="neuron"), torch.ones(16, 4, device="neuron"))
        budget = run.report()["compile_budget"]
        rows = metrics.get_compilation_metrics()
    finally:
        metrics.set_enabled(False)
    assert len(rows) == len(budget["graphs"]) == 2
    for row, g in zip(rows, budget["graphs"]):
        assert (row.graph_name, row.graph_node_count, row.flops, row.cause, row.warm_cache, row.graph_id) == \
            (g["graph"], g["fx_nodes"], g["flops"], g["cause"], g["warm_cache"], g["key"])
    assert [r.flops for r in rows] == [2 * 8 * 16 * 4, 2 * 24 * 16 * 4]
    text = metrics.report()
    assert "graph_stats" in text and rows[1].graph_name in text


def test_metric_tables_are_written_as_torchneurons_csv(tmp_path):
    import csv

    from torch_neuronx.compiler import _compile_log as compile_log

    metrics.reset()
    start = compile_log.count()
    with plan.dry_run():
        _run([8])
    (path,) = metrics.write_tables(str(tmp_path))
    assert path.endswith("metric_table_graph_stats_rank0.csv")
    with open(path) as f:
        table = list(csv.reader(f))
    assert table[0][:6] == ["graph_id", "graph_name", "model_name", "has_collectives", "graph_node_count", "timestamp"]
    assert [row[1] for row in table[1:]] == [r.graph_name for r in compile_log.records(start)]


def test_bad_metrics_input_names_the_argument(monkeypatch):
    import pytest

    from torch_neuronx.runtime import env

    with pytest.raises(TypeError, match="set_enabled"):
        metrics.set_enabled("yes")
    with pytest.raises(ValueError, match="graph_statz"):
        metrics.write_tables(tables=("graph_statz",))
    monkeypatch.setenv("TORCH_NEURONX_ENABLED_METRIC_TABLES", "graph_stats,graph_statz")
    with pytest.raises(env.NeuronEnvironmentError, match="TORCH_NEURONX_ENABLED_METRIC_TABLES"):
        env.parse_names(env.ENABLED_METRIC_TABLES, tuple(metrics.METRIC_TABLES))


def test_a_smaller_last_batch_is_told_to_drop_last():
    import torch._dynamo

    torch._dynamo.reset()
    with plan.dry_run() as run:
        _run([64, 64, 64, 8])   # dim 0 is the batch: three full batches, then a remainder of 8
    (fix,) = run.report()["compile_budget"]["avoidable"]
    assert fix["graphs"] == 2 and fix["graphs_after"] == 1 and "drop_last=True" in fix["fix"]


def test_an_eager_run_has_an_empty_budget():
    budget = build([])
    assert budget["graphs"] == [] and budget["cold_compiles"] == 0 and budget["neuronx_cc_total"] is None
    assert _title(budget) == "Compile budget: no graph compiled"   # no "time unknown for 0 graphs"


def test_compile_only_writes_the_budget_without_running_the_step(monkeypatch, tmp_path):
    import json

    import torch._dynamo

    from torch_neuronx.plan import _compile_budget

    monkeypatch.setenv("TORCH_NEURONX_COMPILE_ONLY", "1")
    monkeypatch.setenv("TORCH_NEURONX_DRY_RUN_REPORT", str(tmp_path / "budget.json"))
    torch._dynamo.reset()
    x = torch.zeros(6, 4, device="neuron")
    torch.compile(lambda t: t.add_(1).relu(), backend="neuron", dynamic=False)(x)
    assert torch.equal(x.cpu(), torch.zeros(6, 4))      # the step did not run
    _compile_budget._write_budget()                     # what compile-only mode registers at exit
    with open(tmp_path / "budget.json") as f:
        written = json.load(f)
    assert written["compile_only"] is True
    last = written["compile_budget"]["graphs"][-1]
    assert last["inputs"] == [[[6, 4], "float32"]] and last["source"] in ("compiled", "disk cache")


def test_the_html_page_has_the_budget_section():
    import torch._dynamo

    from torch_neuronx.plan._html_report import render

    torch._dynamo.reset()
    with plan.dry_run() as run:
        _run([100, 8, 200])
    page = render(run.report())
    assert 'id="compile-budget"' in page, "no compile-budget section"
    assert "multiple of 128" in page and "first call" in page


def test_a_model_plans_report_ends_with_its_budget():
    import torch._dynamo

    from torch_neuronx.compiler import _compile_log as compile_log
    from torch_neuronx.plan.models._report import markdown

    torch._dynamo.reset()
    start = compile_log.count()
    with plan.dry_run():
        _run([16, 32])
    report = {"layout": "TP 1", "world_size": 1, "dtype": "bfloat16", "dry_run": True, "mode": "compiled",
              "model_type": "qwen3", "parameters": 10, "peak_hbm_bytes_per_core": 1, "hbm_capacity_bytes_per_core": 2,
              "fits": True, "memory_breakdown_bytes_per_core": {}, "oom": None, "time_breakdown_s": {},
              "compile_budget": build(compile_log.records(start))}
    text = markdown(report, "generate", [("TTFT", "1 ms")])
    assert "## Compile budget: 2 graphs, " in text and "new shape: input 0 shape (16, 4) -> (32, 4)" in text


def test_the_documented_example_plans_its_compiled_graphs():
    """`python -m torch_neuronx.plan run -- examples/generate_cache_compile.py --cache static`, as
    docs/compile-budget.md gives it: the plan's report has its compiled-graphs section."""
    import os
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "run", "--",
                        os.path.join(repo, "examples", "generate_cache_compile.py"), "--cache", "static"],
                       capture_output=True, text=True, timeout=600, cwd=repo)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "## Compiled graphs:" in p.stdout, p.stdout[-3000:]


def _record(index, flops, training=False, warm=False):
    from torch_neuronx.compiler import GraphRecord

    inputs = (((1, 512), "torch.int64"),)
    return GraphRecord(index, f"forward_{index}", "m", "forward (m.py:1)", 0, "first call", "", inputs, 100, training,
                       False, f"key{index}", (), "compiled", warm, flops=flops)


def test_the_budget_gives_the_fitted_compile_time_of_a_graph_of_public_size():
    """A 7B-class context-encoding graph is inside the public rows' sizes: the budget row carries the fit's
    estimate and range, a training graph is priced at 3x its forward FLOPs, the total sums the cold graphs, and
    a tiny graph stays "unknown" (no public compile time that small), which leaves the total unknown."""
    from torch_neuronx.plan import _compile_time as ct

    llama = next(r for r in ct.ROWS if "Llama-2-7b-hf" in r.source)
    forward, train = _record(0, llama.flops_per_core), _record(1, 1e12, training=True)
    warm = _record(2, 1e12, warm=True)
    budget = build([forward, train, warm])
    rows = budget["graphs"]
    assert rows[0]["neuronx_cc"] == ct.estimate(llama.flops_per_core)
    assert rows[0]["neuronx_cc"]["low_s"] < llama.seconds < rows[0]["neuronx_cc"]["high_s"]
    assert rows[1]["neuronx_cc"] == ct.estimate(3e12)
    total = budget["neuronx_cc_total"]   # the warm graph costs no compile
    assert total["estimate_s"] == rows[0]["neuronx_cc"]["estimate_s"] + rows[1]["neuronx_cc"]["estimate_s"]
    assert "estimated neuronx-cc time" in _title(budget) and "over 15 rows" in budget["compile_time_model"]
    tiny = build([forward, _record(3, 1.8e5)])
    assert "outside" in tiny["graphs"][1]["neuronx_cc"]["unknown"] and tiny["neuronx_cc_total"] is None
    assert "neuronx-cc time unknown for 1 graph" in _title(tiny)
