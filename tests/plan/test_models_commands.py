"""plan generate / plan train on a tiny Qwen3 config, run for real in this process (trn2.3xlarge, the
test runtime's instance): the JSON keys exist and their figures agree with each other."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.plan.conftest import TINY
from torch_neuronx.plan.__main__ import main as plan_main


def _run(command, argv, tmp_path):
    out = tmp_path / "plan.json"
    assert plan_main([command, *argv] + ["--instance", "trn2.3xlarge", "--lnc", "2", "--real", "--json", str(out)]) == 0
    return json.loads(out.read_text())


def test_generate_report(tiny_config_dir, plan_env, tmp_path, capsys):
    batch, prompt, new, tp = 2, 16, 5, 2
    r = _run("generate", ["--config", tiny_config_dir, "--tp", str(tp), "--batch", str(batch),
                             "--input-tokens", str(prompt), "--output-tokens", str(new), "--mode", "eager"], tmp_path)
    assert "TTFT" in capsys.readouterr().out
    for key in ("ttft_ms", "tpot_ms", "output_tokens_per_s", "peak_hbm_bytes_per_core", "fits"):
        assert key in r
    assert r["fits"] is True and r["oom"] is None and (r["world_size"], r["replicas"]) == (4, 2)
    assert r["generated_tokens"] == new and r["forward_calls"] == new      # 1 prefill + new-1 decode steps
    assert r["ttft_ms"] > 0 and r["tpot_ms"] > 0
    total = r["generate_s"]
    assert r["ttft_ms"] / 1e3 + (new - 1) * r["tpot_ms"] / 1e3 == pytest.approx(total)
    assert r["output_tokens_per_s"] == pytest.approx(batch * new / total)
    assert r["output_tokens_per_s_all_replicas"] == pytest.approx(2 * r["output_tokens_per_s"])
    mem = r["memory_breakdown_bytes_per_core"]
    # static cache: keys + values of each layer, this rank's KV heads, bf16
    cache_len = mem["kv_cache"] // (TINY["num_hidden_layers"] * 2 * batch * (TINY["num_key_value_heads"] // tp)
                                    * TINY["head_dim"] * 2)
    assert prompt + new - 1 <= cache_len <= prompt + new
    assert r["peak_hbm_bytes_per_core"] >= mem["parameters"] + mem["kv_cache"]
    assert r["headroom_bytes_per_core"] == r["hbm_capacity_bytes_per_core"] - r["peak_hbm_bytes_per_core"]


def test_train_report_with_accumulation(tiny_config_dir, plan_env, tmp_path):
    micro, seq = 1, 32
    r = _run("train", ["--config", tiny_config_dir, "--tp", "2", "--fsdp", "2", "--micro-batch", str(micro),
                          "--global-batch", "8", "--seq-len", str(seq)], tmp_path)
    for key in ("step_time_s", "tokens_per_s", "sequences_per_s", "mfu", "peak_hbm_bytes_per_core", "fits"):
        assert key in r
    assert (r["fsdp"], r["dp"], r["grad_accum_steps"]) == (2, 1, 4)      # 8 / (1 x 2 data-parallel ranks)
    assert r["step_time_s"] == pytest.approx(4 * r["micro_step_s"] + r["optimizer_step_s"])
    assert r["tokens_per_s"] == pytest.approx(8 * seq / r["step_time_s"])
    assert r["sequences_per_s"] == pytest.approx(8 / r["step_time_s"])
    assert 0 < r["mfu"] < 1 and r["fits"] is True
    mem = r["memory_breakdown_bytes_per_core"]
    assert mem["optimizer_state"] == 2 * mem["parameters"]             # AdamW: exp_avg + exp_avg_sq
    assert r["peak_hbm_bytes_per_core"] > mem["parameters"] + mem["optimizer_state"]
    # TP2 x FSDP2 holds about a quarter of the bf16 weights (norms are replicated over TP)
    full = r["parameters"] * 2
    assert full / 4 <= mem["parameters"] < full / 3


def test_context_parallel_train_runs_for_real_and_says_so(tiny_config_dir, plan_env, tmp_path, capsys):
    """--cp 2 runs the tiny model's steps inside torch's context_parallel (ring attention over the
    fake group's CP ranks); the report and the terminal say how the sequence was split."""
    page = tmp_path / "cp.html"
    r = _run("train", ["--config", tiny_config_dir, "--cp", "2", "--fsdp", "2", "--seq-len", "32", "--html", str(page)],
             tmp_path)
    out = capsys.readouterr().out
    assert "TP1 CP2 FSDP2" in out and "| context parallelism | CP 2: each rank 16 of the 32 tokens" in out
    html = page.read_text()   # the HTML page says the same
    assert "context parallelism" in html and "CP 2: each rank 16 of the 32 tokens" in html
    assert (r["cp"], r["fsdp"], r["world_size"], r["global_batch"]) == (2, 2, 4, 2) and r["fits"] is True
    assert r["step_time_s"] > 0 and r["flops_by_category_per_micro_step"]["attention"] > 0
    # FSDP over FSDP x CP = 4 ranks: a quarter of the parameters (plus one row of rounding per tensor)
    assert r["parameters"] * 2 / 4 <= r["memory_breakdown_bytes_per_core"]["parameters"] < r["parameters"] * 2 / 3


def test_does_not_fit_names_the_failing_allocation(tmp_path, plan_env):
    """A model whose embedding alone (30 GiB) exceeds trn2.3xlarge's 24 GiB per core: the allocator
    refuses it before any host memory is touched, and the plan reports its message."""
    import torch
    from transformers import Qwen3Config

    from torch_neuronx.plan.models import make_layout, plan_generate

    config = Qwen3Config(**{**TINY, "num_hidden_layers": 1, "vocab_size": (30 << 30) // (TINY["hidden_size"] * 2)})
    r = plan_generate(config, make_layout("trn2.3xlarge", 2), input_tokens=4, output_tokens=2, dtype=torch.bfloat16)
    assert r["fits"] is False and r["ttft_ms"] is None
    assert "out of memory. Tried to allocate 30.00 GiB" in r["oom"] and "24.00 GiB" in r["oom"]


def test_tp_x_fsdp_dry_run_equals_the_real_run(tiny_config_dir, plan_env, tmp_path):
    # DTensor parameters used to take the dry run's shape-only path with their global shape, so a
    # TP x FSDP plan failed in the first sharded view ("shape '[32, 32]' is invalid for input of size 2048")
    argv = ["--config", tiny_config_dir, "--tp", "2", "--fsdp", "2", "--micro-batch", "1", "--seq-len", "32",
            "--instance", "trn2.3xlarge", "--lnc", "2"]
    def plan(name, *extra, env=None):
        # each in a fresh process: a test process's earlier allocations would count in its peak
        out = tmp_path / f"{name}.json"
        p = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "train", *argv, *extra, "--json", str(out)],
                           env=dict(os.environ, **(env or {})), capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
        return json.loads(out.read_text())

    real = plan("real", "--real")
    dry = plan("dry", env={"TORCH_NEURONX_DRY_RUN_LARGE_BYTES": "0"})   # every op shape-only
    assert dry["dry_run"] is True and real["dry_run"] is False
    assert dry["memory_breakdown_bytes_per_core"]["parameters"] == real["memory_breakdown_bytes_per_core"]["parameters"]
    assert dry["peak_hbm_bytes_per_core"] == pytest.approx(real["peak_hbm_bytes_per_core"], rel=0.01)


def test_zero1_shards_the_optimizer_state_over_the_dp_replicas(tiny_config_dir, plan_env, tmp_path):
    # in a fresh process: its peak is absolute, and a test worker's earlier allocations would count in it
    out = tmp_path / "zero1.json"
    p = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "train", "--config", tiny_config_dir,
                        "--dp", "4", "--zero1", "--micro-batch", "1", "--seq-len", "16", "--instance",
                        "trn2.3xlarge", "--lnc", "2", "--real", "--json", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    r = json.loads(out.read_text())
    mem = r["memory_breakdown_bytes_per_core"]
    unsharded = 2 * mem["parameters"]            # AdamW's exp_avg + exp_avg_sq of the full replica
    by_rank = r["optimizer_state_bytes_by_dp_rank"]
    assert r["zero1"] is True and len(by_rank) == 4 and sum(by_rank) == unsharded
    # ZeroRedundancyOptimizer gives each rank whole parameters: 1/dp up to the smallest parameter
    assert mem["optimizer_state"] == by_rank[0]
    assert abs(mem["optimizer_state"] - unsharded / 4) <= 0.01 * unsharded / 4
    assert r["peak_hbm_bytes_per_core"] < mem["parameters"] * 2 + unsharded   # not the unsharded state


def test_zero1_with_fsdp_is_refused_with_the_fix(tiny_config_dir, plan_env, tmp_path, capsys):
    with pytest.raises(SystemExit) as err:
        plan_main(["train", "--config", tiny_config_dir, "--tp", "2", "--fsdp", "2", "--zero1", "--instance", "trn2.3xlarge",
                    "--lnc", "2", "--real"])
    assert err.value.code == 2
    message = capsys.readouterr().err
    assert "--zero1 with --fsdp 2" in message and "--tp N --dp M" in message


def test_an_instance_with_more_cores_than_a_process_addresses_plans(tiny_config_dir, tmp_path):
    """trn3.48xlarge at LNC=1 has 128 logical cores, one more than a PyTorch process can address:
    the plan's process sees the first 127 (it runs rank 0's program on neuron:0) and plans the
    whole instance's layout."""
    out = tmp_path / "plan.json"
    env = {k: v for k, v in os.environ.items()
           if k not in ("TORCH_NEURONX_INSTANCE_TYPE", "NEURON_LOGICAL_NC_CONFIG", "NEURON_RT_VISIBLE_CORES",
                        "NEURON_RT_NUM_CORES", "TORCH_NEURONX_DRY_RUN")}
    p = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "generate", "--config", tiny_config_dir,
                        "--instance", "trn3.48xlarge", "--lnc", "1", "--tp", "2", "--input-tokens", "16",
                        "--output-tokens", "2", "--quiet", "--json", str(out)],
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    r = json.loads(out.read_text())
    assert (r["world_size"], r["tp"], r["replicas"]) == (128, 2, 64) and r["fits"]
