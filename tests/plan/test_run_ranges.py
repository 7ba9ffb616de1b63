"""`plan run` gives its time figures the calibrated 80% range of the script's kind: `estimated_total_s_range`
and `estimated_step_s_range` in the JSON (the figure moved by the residual bounds of the kind's entry in
calibration/ranges.json, computed here from the entry's numbers), the range beside the figure in the
terminal report and on the HTML page, and the basis lines naming the kind and its rows."""
from __future__ import annotations

import copy
import html
import json
import math
import os
import re
import subprocess
import sys

import pytest

from torch_neuronx.plan import calibrate
from torch_neuronx.runtime.units import seconds

TRAIN = ("import torch\n"
         "m = torch.nn.Linear(64, 64).to('neuron')\n"
         "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
         "for _ in range(2):\n"
         "    m(torch.randn(8, 64, device='neuron')).sum().backward(); opt.step()\n")

FORWARD = ("import torch\n"
           "m = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64)).to('neuron')\n"
           "with torch.no_grad():\n"
           "    for _ in range(3):\n"
           "        m(torch.randn(8, 64, device='neuron'))\n")

# a tiny Qwen3-MoE trained one step: transformers' default experts implementation runs torch._grouped_mm
MOE = ("import torch\n"
       "from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM\n"
       "cfg = Qwen3MoeConfig(hidden_size=64, num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,\n"
       "                     head_dim=16, intermediate_size=128, moe_intermediate_size=32, num_experts=4,\n"
       "                     num_experts_per_tok=2, vocab_size=128)\n"
       "m = Qwen3MoeForCausalLM(cfg).to(torch.bfloat16).to('neuron')\n"
       "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
       "ids = torch.randint(0, 128, (2, 8), device='neuron')\n"
       "m(input_ids=ids, labels=ids).loss.backward(); opt.step()\n")


def _plan_run(source: str, tmp, name: str, env_extra: dict | None = None):
    """`plan run --json --html` of `source`: (report, printed markdown, HTML page)."""
    script, out, page = tmp / f"{name}.py", tmp / f"{name}.json", tmp / f"{name}.html"
    script.write_text(source)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TORCH_NEURONX_DRY_RUN", "TORCH_NEURONX_PLAN_", "TORCH_NEURONX_ESTIMATE_ASSUMPTIONS"))}
    p = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "run", "--instance", "trn2.3xlarge", "--quiet",
                        "--json", str(out), "--html", str(page), "--", str(script)],
                       capture_output=True, text=True, timeout=300, env={**env, **(env_extra or {})})
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    return json.loads(out.read_text()), p.stdout, page.read_text()


def _entry(kind: str) -> dict:
    return json.loads(calibrate.RANGES.read_text())["kinds"][kind]


def _closed_form(planned: float, *kinds: str) -> list[float]:
    """The actual time's [low, high]: planned / exp(residual high) to planned / exp(residual low), over the
    hull of the kinds' residual bounds."""
    low = min(_entry(k)["residual_low"] for k in kinds)
    high = max(_entry(k)["residual_high"] for k in kinds)
    return [planned / math.exp(high), planned / math.exp(low)]


def _shown(bounds) -> str:
    return f"(80% range {seconds(bounds[0])} to {seconds(bounds[1])})"


def _card_range(page: str, label: str) -> str:
    """The range line under a card of the HTML page."""
    m = re.search(rf'<div class="k">{re.escape(label)}</div><div class="k range">([^<]*)</div>', page)
    assert m, f"no range under the {label!r} card"
    return html.unescape(m.group(1))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return _plan_run(TRAIN, tmp_path_factory.mktemp("run_ranges"), "train")


def test_a_training_script_takes_the_dense_train_range(trained):
    r, printed, page = trained
    kind = "dense/train/none"
    assert r["optimizer_steps"] == 2
    assert r["estimated_total_s_range"] == pytest.approx(_closed_form(r["estimated_total_s"], kind), rel=1e-12)
    assert r["estimated_step_s_range"] == pytest.approx(_closed_form(r["estimated_step_s"], kind), rel=1e-12)
    low, high = r["estimated_total_s_range"]
    assert low < r["estimated_total_s"] < high
    assert r["ranges"]["train"]["kind"] == kind and r["ranges"]["train"]["rows"] == _entry(kind)["rows"]
    assert r["ranges"]["figures"]["phases"] == ["train"] and r["ranges"]["assumptions"] == "default"
    assert set(r["ranges"]) - {"coverage", "assumptions", "figures"} == {"train"}

    total_line = next(line for line in printed.splitlines() if line.startswith("total "))
    assert f"total {seconds(r['estimated_total_s'])} {_shown(r['estimated_total_s_range'])}" in total_line
    assert f"{seconds(r['estimated_step_s'])} per step {_shown(r['estimated_step_s_range'])}" in total_line
    assert "80% ranges from the calibration table (docs/calibration.md), for the default assumptions:" in printed
    assert f"- train ({kind}): " in printed and "a dense script" in printed and "so the train range" in printed

    assert _card_range(page, "estimated total") == _shown(r["estimated_total_s_range"]).strip("()")
    assert _card_range(page, "per optimizer step") == _shown(r["estimated_step_s_range"]).strip("()")
    assert 'id="ranges"' in page and html.escape(f"train ({kind})", quote=True) in page


def test_a_script_that_neither_trains_nor_steps_takes_the_hull_of_prefill_and_decode(tmp_path):
    """No backward pass, no optimizer step: prompts and token steps cannot be told apart, so both
    phases' ranges bound it. With the cost model's assumptions overridden the report says the
    ranges hold for the defaults."""
    r, printed, page = _plan_run(FORWARD, tmp_path, "forward", {"TORCH_NEURONX_ESTIMATE_ASSUMPTIONS": "eager_launch_s=20e-6"})
    assert r["optimizer_steps"] == 0 and r["estimated_step_s"] is None and "estimated_step_s_range" not in r
    kinds = ("dense/prefill/none", "dense/decode/none")
    assert r["estimated_total_s_range"] == pytest.approx(_closed_form(r["estimated_total_s"], *kinds), rel=1e-12)
    assert [r["ranges"][p]["kind"] for p in ("prefill", "decode")] == list(kinds) and "train" not in r["ranges"]
    assert r["ranges"]["figures"]["phases"] == ["prefill", "decode"]
    assert r["ranges"]["assumptions"].startswith("overridden: the ranges were calibrated with the default assumptions")

    total_line = next(line for line in printed.splitlines() if line.startswith("total "))
    assert _shown(r["estimated_total_s_range"]) in total_line
    assert "for the overridden: the ranges were calibrated with the default assumptions" in printed
    assert "hull of the prefill and decode ranges" in printed
    assert _card_range(page, "estimated total") == _shown(r["estimated_total_s_range"]).strip("()")
    assert "the ranges were calibrated with the default assumptions" in html.unescape(page)


def test_a_script_that_runs_grouped_expert_matmuls_is_moe(tmp_path):
    r, printed, _ = _plan_run(MOE, tmp_path, "moe")
    assert r["ops_by_name"].get("aten::_grouped_mm")
    kind = "moe/train/none"
    assert r["ranges"]["train"]["kind"] == kind
    assert r["estimated_total_s_range"] == pytest.approx(_closed_form(r["estimated_total_s"], kind), rel=1e-12)
    assert f"- train ({kind}): " in printed and "a MoE script (it ran grouped expert matmuls)" in printed


def test_a_kind_the_table_lacks_gets_no_range_and_the_report_says_so(trained):
    from torch_neuronx.plan._html_report import render
    from torch_neuronx.plan._report import markdown
    from torch_neuronx.plan._run_ranges import attach

    r = copy.deepcopy(trained[0])
    for key in ("ranges", "estimated_total_s_range", "estimated_step_s_range"):
        del r[key]
    table = json.loads(calibrate.RANGES.read_text())
    del table["kinds"]["dense/train/none"]
    attach(r, backward=True, overridden=False, ranges=table)
    assert "estimated_total_s_range" not in r and "estimated_step_s_range" not in r
    assert "no range for dense/train/none" in r["ranges"]["missing"]
    printed = markdown(r)
    assert "No 80% range: the calibration table has no range for dense/train/none" in printed
    assert "80% range " not in printed
    page = render(r)
    assert 'class="k range"' not in page and "No 80% range" in page


def test_a_script_that_trains_and_generates_takes_all_three_phases(trained):
    """An RL-style script (training steps and generate() calls) bounds its figures by the hull of all three."""
    from torch_neuronx.plan._run_ranges import attach

    r = copy.deepcopy(trained[0])
    del r["ranges"]
    r["generate_calls"] = [{"site": "rl.py:12"}]
    attach(r, backward=True, overridden=False)
    kinds = ("dense/train/none", "dense/prefill/none", "dense/decode/none")
    assert r["ranges"]["figures"]["phases"] == ["train", "prefill", "decode"]
    assert r["estimated_total_s_range"] == pytest.approx(_closed_form(r["estimated_total_s"], *kinds), rel=1e-12)


def test_a_multi_rank_report_bounds_its_step_time_by_the_slowest_ranks_kind(trained):
    """The merged report of a multi-rank `plan run` (its ranks' own reports merged as plan/distributed does)."""
    from torch_neuronx.plan.distributed._merge import markdown, merge

    m = merge({0: copy.deepcopy(trained[0])}, world_size=1, nnodes=1, nproc_per_node=1)
    assert m["ranges"]["train"]["kind"] == "dense/train/none"
    assert m["step_time_s_range"] == pytest.approx(_closed_form(m["step_time_s"], "dense/train/none"), rel=1e-12)
    assert m["estimated_total_s_range"] == trained[0]["estimated_total_s_range"]
    step_line = next(line for line in markdown(m).splitlines() if line.startswith("step time (slowest rank"))
    assert step_line.endswith(f"{seconds(m['step_time_s'])} {_shown(m['step_time_s_range'])}")
    assert "- train (dense/train/none): " in markdown(m)
