"""The calibration table: its rows cite their public source, its statistics and leave-one-out fit
are the stated formulas, and a row is planned by the same planner command a user runs (a tiny
model here; the shipped rows are full size, planned by `--plan-missing` and cached)."""
import math
import os
from dataclasses import replace
from urllib.parse import urlparse

import pytest

from torch_neuronx.plan import calibrate
from torch_neuronx.estimate.assumptions import DEFAULTS
from torch_neuronx.estimate.roofline import parse, seconds_at


def test_rows_cite_sources_and_known_models():
    rows = calibrate.load_rows()
    models = calibrate.load_models()
    assert len(rows) >= 40 and len({r.id for r in rows}) == len(rows)
    for r in rows:
        for url in r.source.split(" ; "):
            assert urlparse(url).scheme == "https" and urlparse(url).netloc, (r.id, url)
        assert r.release and r.published > 0 and r.model in models, r.id
        assert r.metric in calibrate.METRICS
    for name, arch in models.items():
        assert arch["source"].startswith("huggingface.co/"), name


def _terms(counts: dict, fixed: float = 0.0):
    """Roofline terms (estimate/roofline.py) from {(matmul, fill, latency, other, memory): count}."""
    return parse({"terms": {",".join(repr(float(x)) for x in k): n for k, n in counts.items()}, "fixed_s": fixed})


TENSOR_BOUND = _terms({(1.0, 0.0, 0.0, 0.0, 0.0): 1})   # all of it moves with matmul_efficiency
UNMOVED = _terms({(0.0, 0.0, 0.0, 1.0, 0.0): 1})        # other engines' work: no efficiency moves it


def test_statistics_are_the_stated_formulas():
    s = calibrate.summary([1.0, 1.2, 1.4, 0.5])
    logs = sorted(abs(math.log(x)) for x in (1.0, 1.2, 1.4, 0.5))
    assert s["median_abs_log_ratio"] == pytest.approx((logs[1] + logs[2]) / 2)
    assert s["within_1.25x"] == 0.5 and s["within_1.5x"] == 0.75 and s["rows"] == 4
    # re-timing: each term is max(matmul x a + fill x b + latency, other, memory x b), plus the fixed part
    terms = _terms({(2.0, 1.0, 0.5, 0.0, 1.0): 3, (0.0, 0.0, 0.0, 1.0, 4.0): 1}, fixed=0.25)
    assert seconds_at(terms, 1.0, 1.0) == pytest.approx(3 * 3.5 + 4.0 + 0.25)
    assert seconds_at(terms, 2.0, 1.0) == pytest.approx(3 * 5.5 + 4.0 + 0.25)        # only the FLOPs part moves
    assert seconds_at(terms, 1.0, 0.5) == pytest.approx(3 * 3.0 + 2.0 + 0.25)        # fill and HBM halve
    assert list(seconds_at(terms, [1.0, 2.0], 1.0)) == pytest.approx([14.75, 20.75])  # many settings at once


def test_fit_and_leave_one_out():
    """Three TTFT rows planned 1.25x slow and one 2x slow, all TensorE-bound: the fitted
    matmul_efficiency puts the three within 1.25x (no setting brings in all four) and, among the
    settings that do, makes them exact: the default x 1.25 (the 2x row does not pull it); each row's
    leave-one-out ratio comes from the fit on the other three."""
    row = calibrate.Row("a", "https://x", "r", "Llama-2-7b", "trn1.32xlarge", 1, 32, 1, 1, 1, 4096, 128, 128,
                        "ttft_ms", 10.0, "")
    ratios = [1.25, 1.25, 1.25, 2.0]
    items = [calibrate.Observed(replace(row, id=f"r{i}"), r, TENSOR_BOUND) for i, r in enumerate(ratios)]
    defaults = replace(DEFAULTS, matmul_efficiency=0.5)
    out = calibrate.fit(items, defaults)
    assert out["constants"]["matmul_efficiency"]["fitted"] == pytest.approx(0.5 * 1.25, abs=0.002)
    assert out["rows"]["r3"]["leave_one_out"] == pytest.approx(2.0 / 1.25, rel=0.005)   # the others fit 1.25x
    assert out["rows"]["r0"]["leave_one_out"] == pytest.approx(1.0, rel=0.005)          # median of 1.25, 1.25, 2
    # an efficiency never exceeds 1: plans 4x slow at efficiency 0.5 fit 1, not 2
    capped = calibrate.fit([calibrate.Observed(replace(row, id=f"c{i}"), 4.0, TENSOR_BOUND) for i in range(3)], defaults)
    assert capped["constants"]["matmul_efficiency"]["fitted"] == pytest.approx(1.0)
    # too few rows to fit: the constant stays at its default
    few = calibrate.fit(items[:2], defaults)
    assert few["constants"]["matmul_efficiency"]["fitted"] == 0.5 and few["rows"]["r0"]["fitted"] == 1.25


def test_the_goal_is_bounded_by_what_one_setting_reaches():
    """Two TensorEngine-bound rows planned 1x and 0.4x (fast): one matmul_efficiency scales both alike,
    so no setting puts both within 1.25x (the bound is half the rows); a third row, bound by HBM and
    planned 0.5x, is brought in by hbm_efficiency on its own (two of three)."""
    row = calibrate.Row("a", "https://x", "r", "Llama-2-7b", "trn1.32xlarge", 1, 32, 1, 1, 1, 4096, 128, 128,
                        "ttft_ms", 10.0, "")
    two = [calibrate.Observed(replace(row, id=f"t{i}"), r, TENSOR_BOUND) for i, r in enumerate((1.0, 0.4))]
    assert calibrate.best_within(two, DEFAULTS)[0] == pytest.approx(0.5)
    hbm = calibrate.Observed(replace(row, id="h"), 0.5, _terms({(0.0, 0.0, 0.0, 0.0, 1.0): 1}))
    share, setting = calibrate.best_within(two + [hbm], DEFAULTS)
    assert share == pytest.approx(2 / 3)
    assert 0.85 / 2.5 <= setting["hbm_efficiency"] <= 0.85 / 1.6     # what brings the HBM row to 0.8-1.25x


def test_reduction_start_up_is_fitted_on_every_row_with_reducing_collectives():
    """Decode rows whose published time is the plan's plus 75 us per all-reduce (different counts
    and graph times): the fit recovers a start-up of default + 75 us, which makes every row exact
    and predicts each row left out; a row without reducing collectives does not move it."""
    row = calibrate.Row("a", "https://x", "r", "Llama-2-7b", "trn1.32xlarge", 1, 32, 1, 1, 1, 4096, 128, 128,
                        "tpot_ms", 10.0, "")
    defaults = DEFAULTS
    extra = 75e-6
    items = []
    for i, (n, seconds) in enumerate([(65, 2.2e-3), (161, 7.8e-3), (65, 2.4e-3), (129, 4.0e-3)]):
        items.append(calibrate.Observed(replace(row, id=f"d{i}"), seconds / (seconds + n * extra), UNMOVED, n, seconds))
    items.append(calibrate.Observed(replace(row, id="train", metric="sequences_per_s"), 1.0, TENSOR_BOUND, 0, 1.0))
    out = calibrate.fit(items, defaults)
    fitted = out["constants"]["reduction_launch_s"]
    assert fitted["rows"] == 4
    assert fitted["fitted"] == pytest.approx(defaults.reduction_launch_s + extra, abs=0.5e-6)
    for r in out["rows"].values():
        assert r["fitted"] == pytest.approx(1.0, abs=0.01) and r["leave_one_out"] == pytest.approx(1.0, abs=0.01)
    # the setting that plans with the fit names the constants that moved
    result = {"constants": out["constants"]}
    assert calibrate.assumptions_setting(result).startswith("`TORCH_NEURONX_ESTIMATE_ASSUMPTIONS=")
    assert "reduction_launch_s=" in calibrate.assumptions_setting(result)


def _observed(rows, entry):
    out = []
    for row in rows:
        breakdown, count, seconds, roofline = calibrate._phase(row, entry["report"])
        ratio = calibrate.time_ratio(row, calibrate.planned_figure(row, entry))
        out.append(calibrate.Observed(row, ratio, roofline, count, seconds, calibrate.host_share(row, entry["report"])))
    return out


def test_a_row_is_planned_by_the_planner_command(tmp_path):
    tiny = {"Tiny": {"source": "huggingface.co/none (test)", "model_type": "llama", "vocab_size": 256,
                     "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "num_key_value_heads": 4, "tie_word_embeddings": False}}
    ttft = calibrate.Row("tiny-ttft", "https://example.org", "r", "Tiny", "trn2.3xlarge", 1, 2, 1, 1, 2, 64,
                         16, 8, "ttft_ms", 1.0, "")
    tpot = replace(ttft, id="tiny-tpot", metric="tpot_ms", published=0.5)
    assert ttft.layout_key() == tpot.layout_key()          # one plan serves both rows
    entry = calibrate.plan_row(ttft, tiny, timeout=600)
    assert "report" in entry, entry
    assert entry["argv"][:1] == ["generate"] and "--tp" in entry["argv"]
    result = calibrate.build([ttft, tpot], {ttft.layout_key(): entry})
    by_id = {r["id"]: r for r in result["rows"]}
    assert by_id["tiny-ttft"]["ratio"] == pytest.approx(entry["report"]["ttft_ms"] / 1.0)
    assert by_id["tiny-tpot"]["ratio"] == pytest.approx(entry["report"]["tpot_ms"] / 0.5)
    assert result["rows_compared"] == 2 and "planned/published" in calibrate.markdown(result)
    assert "Goal: 80% of rows within 1.25x leave-one-out; measured " in calibrate.markdown(result)
    # each metric is compared with its graph: TTFT with the CTE's time and collectives, TPOT with the TKG's
    graphs = entry["report"]["graphs"]
    breakdown, count, seconds, roofline = calibrate._phase(ttft, entry["report"])
    assert breakdown == graphs["context_encoding"]["time_breakdown_s"]
    from torch_neuronx.estimate.roofline import seconds_at
    assert seconds_at(roofline, 1.0, 1.0) == pytest.approx(graphs["context_encoding"]["seconds"], rel=1e-9)
    assert count == graphs["context_encoding"]["collectives"]["all_reduce"]["count"] > 0   # the reducing ones
    assert seconds == pytest.approx(graphs["context_encoding"]["seconds"], rel=0.01)
    assert calibrate._phase(tpot, entry["report"])[0] == graphs["token_generation"]["time_breakdown_s"]
    # the fit's re-timing is the planner's: the same rows planned with other efficiencies have the
    # ratios it predicts from the first plan's roofline terms. One core (a collective between two
    # cores of a chip moves through HBM, which the terms keep fixed) and launches off in both plans
    # (a launch the host hides behind queued work hides more as that work grows; at full size the
    # launches are a small part, this tiny model is mostly launches)
    one = replace(ttft, id="one-ttft", tp=1, input_tokens=256, seq_len=264)
    rows = [one, replace(one, id="one-tpot", metric="tpot_ms", published=0.5)]
    # the host's share of each serving step kept small beside these tiny graphs, so the efficiencies move them
    no_launch = "graph_launch_s=0,eager_launch_s=0,serving_host_step_s=5e-6"
    other = {"matmul_efficiency": 0.2, "hbm_efficiency": 0.25}
    setting = ",".join(f"{k}={v}" for k, v in other.items())
    plans = [calibrate.plan_row(one, tiny, timeout=600,
                                env=dict(os.environ, TORCH_NEURONX_ESTIMATE_ASSUMPTIONS=s)) for s in
             (no_launch, f"{no_launch},{setting}")]
    first, again = ({r["id"]: r for r in calibrate.build(rows, {one.layout_key(): p})["rows"]} for p in plans)
    observed = {o.row.id: o for o in _observed(rows, plans[0])}
    for rid in first:
        assert again[rid]["ratio"] > 1.03 * first[rid]["ratio"], rid      # the efficiencies move it
        assert calibrate.predicted(observed[rid], DEFAULTS, other) == pytest.approx(again[rid]["ratio"], rel=1e-6)
    # the host's share of each serving step is planned (serving_host_step_s) and no efficiency moves it:
    # the predictions above hold only when the fit keeps it fixed
    assert plans[0]["report"]["host_step_s"] == 5e-6
    assert all(o.host_s == 5e-6 for o in observed.values())
    # a layout the planner refuses is listed with its reason, not compared
    bad = replace(ttft, id="bad", tp=3)
    refused = calibrate.plan_row(bad, tiny, timeout=600)
    assert "refused" in refused and "TP x FSDP x PP = 3" in refused["refused"]
    assert "planner refused" in calibrate.build([bad], {bad.layout_key(): refused})["rows"][0]["status"]
