"""The planner's TTFT and TPOT equal their analytic roofline within 10% when launch costs are zero:
prefill of 4096 tokens is compute-bound (its FLOPs at the TensorEngine peak x matmul_efficiency),
a decode step at batch 1 is memory-bound (its weights and KV cache at HBM bandwidth x
hbm_efficiency). Planned with `python -m torch_neuronx.plan generate` as a user would (a dry run:
shapes only), on a one-layer model wide enough that the matmuls dominate."""
import json
import os
import subprocess
import sys

import pytest

import neuron_hardware
from torch_neuronx.estimate.assumptions import DEFAULTS

CONFIG = dict(vocab_size=32768, hidden_size=16384, intermediate_size=53248, num_hidden_layers=1,
              num_attention_heads=128, num_key_value_heads=8, head_dim=128,
              max_position_embeddings=8192, tie_word_embeddings=False)
PROMPT, NEW = 4096, 3
NO_LAUNCH = ("eager_launch_s=0,graph_launch_s=0,host_sync_s=0,collective_launch_s=0,reduction_launch_s=0,"
             "serving_host_step_s=0")


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    from transformers import Qwen3Config

    path = tmp_path_factory.mktemp("wide")
    Qwen3Config(**CONFIG).save_pretrained(path)
    out = path / "plan.json"
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_NEURONX_INSTANCE_TYPE",
                                                            "NEURON_LOGICAL_NC_CONFIG", "TORCH_NEURONX_DRY_RUN")}
    env["TORCH_NEURONX_ESTIMATE_ASSUMPTIONS"] = NO_LAUNCH
    p = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "generate", "--config", str(path),
                        "--instance", "trn2.3xlarge", "--lnc", "2", "--tp", "1", "--batch", "1",
                        "--input-tokens", str(PROMPT), "--output-tokens", str(NEW), "--json", str(out)],
                       env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(out.read_text())


def _layer_params():
    h, i = CONFIG["hidden_size"], CONFIG["intermediate_size"]
    q = CONFIG["num_attention_heads"] * CONFIG["head_dim"]
    kv = CONFIG["num_key_value_heads"] * CONFIG["head_dim"]
    return h * q + 2 * h * kv + q * h + 3 * h * i


def _core():
    chip = neuron_hardware.INSTANCES["trn2.3xlarge"].chip
    lnc = 2
    return chip.tensor_flops["bfloat16"] * lnc, chip.hbm_bytes_per_s / chip.physical_cores * lnc


def test_prefill_is_its_flops_at_peak(plan):
    peak, _ = _core()
    linear = 2 * _layer_params() * PROMPT + 2 * CONFIG["hidden_size"] * CONFIG["vocab_size"]   # last token's logits
    attention = 4 * PROMPT * PROMPT * CONFIG["num_attention_heads"] * CONFIG["head_dim"]    # QK^T and AV
    roofline = (linear + attention) / (peak * DEFAULTS.matmul_efficiency)
    ttft = plan["ttft_ms"] / 1e3
    assert 1.0 <= ttft / roofline <= 1.10, (ttft, roofline)


def test_decode_step_is_its_bytes_at_bandwidth(plan):
    _, bw = _core()
    weights = 2 * (_layer_params() + CONFIG["hidden_size"] * CONFIG["vocab_size"])   # bf16, lm_head included
    kv_cache = 2 * 2 * (PROMPT + NEW) * CONFIG["num_key_value_heads"] * CONFIG["head_dim"]
    roofline = (weights + kv_cache) / (bw * DEFAULTS.hbm_efficiency)
    tpot = plan["tpot_ms"] / 1e3
    assert 1.0 <= tpot / roofline <= 1.10, (tpot, roofline)
