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


def test_the_shipped_table_says_why_its_estimates_are_unknown():
    if ct.fit() is None:
        assert ct.estimate(1e12) == {"unknown": ct.estimate(1e12)["unknown"]} and "no fit" in ct.estimate(1e12)["unknown"]
        assert "unknown" in ct.status()
    assert "FLOPs are unknown" in ct.estimate(None)["unknown"]


def test_the_documented_command_prints_the_table_and_its_fit():
    """`python -m torch_neuronx.plan._compile_time`, as docs/compile-budget.md gives it."""
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "torch_neuronx.plan._compile_time"], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "| https://" in p.stdout and "fit:" in p.stdout, p.stdout[-2000:]
