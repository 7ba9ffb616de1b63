"""A model-level plan carries the calibrated 80% range of each headline figure: `<figure>_range` in
the JSON (the figure moved by its kind's residual bounds from calibration/ranges.json), the range
beside the figure in the terminal report and on the HTML page, and the rows it rests on."""
from __future__ import annotations

import json
import math

import pytest

from torch_neuronx.plan import calibrate
from torch_neuronx.plan.__main__ import main as plan_main


def _run(command, argv, tmp_path):
    out, page = tmp_path / "plan.json", tmp_path / "plan.html"
    assert plan_main([command, *argv, "--instance", "trn2.3xlarge", "--lnc", "2", "--real", "--json", str(out),
                      "--html", str(page)]) == 0
    return json.loads(out.read_text()), page.read_text()


def _bounds(kind: str):
    entry = json.loads(calibrate.RANGES.read_text())["kinds"][kind]
    return math.exp(entry["residual_low"]), math.exp(entry["residual_high"]), entry["rows"]


def test_train_plan_carries_the_train_kinds_range(tiny_config_dir, plan_env, tmp_path, capsys):
    r, page = _run("train", ["--config", tiny_config_dir, "--tp", "2", "--global-batch", "4", "--seq-len", "32"],
                   tmp_path)
    low, high, rows = _bounds("dense/train/nxd-training")
    step = r["step_time_s"]
    assert r["step_time_s_range"] == pytest.approx([step / high, step / low])
    assert r["tokens_per_s_range"] == pytest.approx([r["tokens_per_s"] * low, r["tokens_per_s"] * high])
    assert r["sequences_per_s_range"] == pytest.approx([r["sequences_per_s"] * low, r["sequences_per_s"] * high])
    assert r["moe"] is False and r["ranges"]["train"]["kind"] == "dense/train/nxd-training"
    assert r["ranges"]["train"]["rows"] == rows and r["ranges"]["assumptions"] == "default"
    printed = capsys.readouterr().out
    step_line = next(line for line in printed.splitlines() if line.startswith("| step time"))
    assert "80% range" in step_line
    assert "train (dense/train/nxd-training)" in printed and rows[0] in printed
    assert "80% range" in page and 'id="ranges"' in page


def test_generate_plan_carries_prefill_and_decode_ranges(tiny_config_dir, plan_env, tmp_path, capsys):
    """Eager generate(): no calibrated stack runs it, so its figures take the widened ranges of every
    row (the deployed mode's are NxD Inference's: tests/estimate/test_ranges.py)."""
    r, _ = _run("generate", ["--config", tiny_config_dir, "--tp", "2", "--input-tokens", "16",
                             "--output-tokens", "4", "--mode", "eager"], tmp_path)
    assert r["ranges"]["prefill"]["pooled"] == "all rows"
    for key, kind in (("ttft_ms", "dense/prefill/none"), ("tpot_ms", "dense/decode/none")):
        low, high, _ = _bounds(kind)
        assert r[f"{key}_range"] == pytest.approx([r[key] / high, r[key] / low])
    low, high = r["output_tokens_per_s_range"]
    assert low < r["output_tokens_per_s"] < high
    assert r["output_tokens_per_s_all_replicas_range"] == pytest.approx([low * r["replicas"], high * r["replicas"]])
    printed = capsys.readouterr().out
    assert "80% range" in next(line for line in printed.splitlines() if line.startswith("| TTFT"))
