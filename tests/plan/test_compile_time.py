"""The neuronx-cc compile-time table and its fit: a power law in FLOPs per core over the measured
rows of known size, its leave-one-out error, and "unknown" where the rows do not reach."""
from __future__ import annotations

import math

import pytest

from torch_neuronx.plan import _compile_time as ct


def _row(seconds, flops, bound="="):
    return ct.CompileTimeRow("https://example.org/log", "a graph", seconds, bound, flops, "read from its log")


def test_every_row_names_its_public_source_and_its_graph():
    for r in ct.ROWS:
        assert r.source.startswith("https://github.com/") and r.graph and r.how
        assert r.bound in ("=", ">", "<") and r.seconds > 0


def test_a_power_law_is_recovered_with_its_leave_one_out_error():
    rows = [_row(2.0 * (f / 1e9) ** 0.5, f) for f in (1e9, 1e10, 1e11, 1e12)]
    fit = ct.fit(rows)
    assert fit.b == pytest.approx(0.5) and 10 ** (fit.a + 9 * fit.b) == pytest.approx(2.0)
    assert fit.loo_log10_rms == pytest.approx(0.0, abs=1e-9)   # exact data: each row predicted exactly
    noisy = [_row(s * k, f) for (s, f), k in zip(((r.seconds, r.flops_per_core) for r in rows), (1.5, 1, 1, 1 / 1.5))]
    assert ct.fit(noisy).loo_log10_rms > 0.05   # a factor 1.5 off at both ends: the held-out rows miss


def test_bounds_and_unknown_sizes_stay_out_of_the_fit():
    rows = [_row(10, 1e10), _row(100, 1e12), _row(3600, 1e14, ">"), _row(5, None)]
    assert ct.fit_rows(rows) == rows[:2] and ct.fit(rows) is None   # two usable rows: no error can be measured


def test_estimates_only_inside_the_fitted_sizes():
    fit = ct.fit([_row(10, 1e10), _row(30, 1e11), _row(100, 1e12)])
    low, mid, high = fit.seconds(1e11)
    assert low < mid < high and math.isclose(mid, 10 ** (fit.a + 11 * fit.b))
    assert fit.seconds(1e15) is None and fit.seconds(1e6) is None


def test_the_shipped_table_is_fitted_by_an_independent_least_squares():
    """The shipped fit against numpy's own line fit and a leave-one-out recomputed here."""
    import numpy as np

    rows = ct.fit_rows()
    assert len(rows) >= ct.MIN_ROWS
    x = np.log10([r.flops_per_core for r in rows])
    y = np.log10([r.seconds for r in rows])
    b, a = np.polyfit(x, y, 1)
    fit = ct.fit()
    assert fit.rows == len(rows) and fit.a == pytest.approx(a) and fit.b == pytest.approx(b)
    held_out = []
    for i in range(len(rows)):
        keep = np.arange(len(rows)) != i
        bi, ai = np.polyfit(x[keep], y[keep], 1)
        held_out.append(ai + bi * x[i] - y[i])
    assert fit.loo_log10_rms == pytest.approx(float(np.sqrt(np.mean(np.square(held_out)))))
    assert fit.flops_range == (min(r.flops_per_core for r in rows), max(r.flops_per_core for r in rows))
    assert "over 15 rows" in ct.status() and "leave-one-out error x" in ct.status()


def test_estimates_of_the_shipped_fit_bracket_a_fitted_graph_and_stop_outside():
    llama = next(r for r in ct.ROWS if "Llama-2-7b-hf" in r.source)
    est = ct.estimate(llama.flops_per_core)
    assert est["low_s"] < est["estimate_s"] < est["high_s"]
    assert est["low_s"] < llama.seconds < est["high_s"]   # the published time lies inside the range
    assert est["high_s"] / est["estimate_s"] == pytest.approx(10 ** ct.fit().loo_log10_rms)
    assert "outside" in ct.estimate(1e7)["unknown"]   # a tiny model's graph: no public figure that small
    assert "outside" in ct.estimate(1e17)["unknown"]
    assert "FLOPs are unknown" in ct.estimate(None)["unknown"]


@pytest.mark.parametrize("row", [r for r in ct.ROWS if r.model], ids=lambda r: r.source.split("/")[-2])
def test_each_fitted_rows_flops_are_what_pytorchs_flop_counter_counts(row):
    """FLOPs per core of the row's graph, counted again: the model built from its Hugging Face config on the
    meta device (nothing allocated), one forward over its tokens with last-token logits, / its cores."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import AutoConfig, AutoModelForCausalLM

    kwargs = dict(row.model)
    config = AutoConfig.for_model(kwargs.pop("model_type"), **kwargs)
    config.use_cache = False
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        ids = torch.zeros(1, row.tokens, dtype=torch.long)
        causal = torch.zeros(1, 1, row.tokens, row.tokens, dtype=torch.bfloat16)   # 4-D: used as given
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        model(input_ids=ids, attention_mask=causal, logits_to_keep=1)
    assert counter.get_total_flops() / row.cores == pytest.approx(row.flops_per_core, rel=1e-3)


def test_the_documented_commands_print_the_table_its_fit_and_an_estimate():
    """`python -m torch_neuronx.plan._compile_time [--flops 3.4e12]`, as docs/compile-budget.md gives them."""
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "torch_neuronx.plan._compile_time"]
    p = subprocess.run(cmd + ["--flops", "3.4e12"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "| https://" in p.stdout and f"fit: {ct.status()}" in p.stdout, p.stdout[-2000:]
    low, mid, high = ct.fit().seconds(3.4e12)
    assert f"'estimate_s': {mid!r}" in p.stdout and f"'high_s': {high!r}" in p.stdout, p.stdout[-500:]
    bad = subprocess.run(cmd + ["--flops", "0"], capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2 and "--flops must be a positive number of FLOPs per core" in bad.stderr
