"""`plan train` beyond a plain decoder: the vocabulary padded as Megatron pads it, masked-LM and
image-classification models through their Auto classes, selective activation recomputation next
to full, compiled steps, and the parameter count of a model that does not fit. Small configs run
for real in this process on the test runtime's trn2.3xlarge (LNC 2); the FLOPs are checked against
closed forms and PyTorch's own FlopCounterMode / flop formulas."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from tests.plan.conftest import TINY
from torch_neuronx.plan.models import make_layout, plan_train
from torch_neuronx.plan.models._build import padded_vocab_size, parameter_count, training_vocab_multiple

SMALL_BERT = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
                  vocab_size=30522, max_position_embeddings=128)
SMALL_VIT = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
                 image_size=64, patch_size=16, num_labels=10)
# GPT-NeoX-style (GPT-3's tokenizer: 50,257 tokens), small widths; 8 heads so TP 8 splits them
SMALL_NEOX = dict(model_type="gpt_neox", hidden_size=64, num_hidden_layers=2, num_attention_heads=8,
                  intermediate_size=256, vocab_size=50257, tie_word_embeddings=False, rotary_pct=0.25)


def _plan_cli(tmp_path, config: dict, *flags, name="plan"):
    """`python -m torch_neuronx.plan train` in a fresh process; its JSON report and its terminal text."""
    path = tmp_path / f"{name}-config.json"
    path.write_text(json.dumps(config))
    out = tmp_path / f"{name}.json"
    p = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "train", "--config", str(path), "--quiet",
                        "--json", str(out), *flags], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    return json.loads(out.read_text()), p.stdout


def test_megatron_vocab_rule():
    # Megatron-LM's _vocab_size_with_padding: a multiple of make_vocab_size_divisible_by x TP (default 128)
    assert padded_vocab_size(50257, 128 * 8) == 51200 and padded_vocab_size(50257, 128) == 50304
    assert training_vocab_multiple(50257, 8, None) == 1024      # TP does not divide it: Megatron's 128 x TP
    assert training_vocab_multiple(128256, 8, None) == 1        # TP divides it: left as NxD Training trains it
    assert training_vocab_multiple(128256, 8, 128) == 1024      # asked for: Megatron's rule
    with pytest.raises(ValueError, match="--make-vocab-size-divisible-by must be a positive integer"):
        training_vocab_multiple(50257, 8, 0)


def test_gpt_vocab_padded_at_tp8_costs_the_padded_head(tmp_path):
    """vocab 50,257 at TP 8 (TP does not divide it): padded to 51,200 as Megatron pads it; every
    matmul FLOP of the step equals the closed form with the padded head."""
    r, out = _plan_cli(tmp_path, SMALL_NEOX, "--instance", "trn2.3xlarge", "--lnc", "1", "--tp", "8", "--seq-len",
                       "32", "--real")
    tp, s, h, i, layers = 8, 32, 64, 256, 2
    padded = -(-50257 // (128 * tp)) * 128 * tp
    assert r["vocab_padded"] == {"vocab_size": 50257, "padded_to": padded} == {"vocab_size": 50257, "padded_to": 51200}
    assert "50,257 padded to 51,200 so TP 8 divides it" in out
    # forward matmuls per core: fused QKV h -> 3h/TP, dense h/TP -> h, MLP h -> i/TP -> h, LM head h -> V/TP
    layer = 2 * s * (h * 3 * h // tp + h // tp * h + 2 * h * i // tp)
    head = 2 * s * h * padded // tp
    assert r["flops_by_category_per_micro_step"]["matmul"] == 3 * (layers * layer + head)   # forward + 2x backward
    from transformers import GPTNeoXConfig

    real = GPTNeoXConfig(**{k: v for k, v in SMALL_NEOX.items() if k != "model_type"})
    assert r["parameters"] == parameter_count(real)   # the real model's count, not the padded one's


def test_make_vocab_size_divisible_by_pads_as_megatron(plan_env):
    from transformers import GPTNeoXConfig

    config = GPTNeoXConfig(**{k: v for k, v in SMALL_NEOX.items() if k != "model_type"})
    layout = make_layout("trn2.3xlarge", 2, tp=4)
    one = plan_train(config, layout, seq_len=16, make_vocab_size_divisible_by=1)
    wide = plan_train(config, layout, seq_len=16, make_vocab_size_divisible_by=128)
    assert one["vocab_padded"]["padded_to"] == 50260 and wide["vocab_padded"]["padded_to"] == 50688   # 4 and 512
    # only the LM head's width differs: 2 x 16 tokens x 64 x (extra rows / TP), forward + 2x backward
    extra = 3 * 2 * 16 * 64 * (50688 - 50260) // 4
    assert wide["flops_by_category_per_micro_step"]["matmul"] - one["flops_by_category_per_micro_step"]["matmul"] == extra


def _flops_on_meta(auto_class, config, **inputs):
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        model = auto_class.from_config(config, attn_implementation="eager")
        inputs = {k: v.to("meta") for k, v in inputs.items()}
    with FlopCounterMode(display=False) as counter:
        model(**inputs).loss.backward()
    return {str(op): n for op, n in counter.get_flop_counts()["Global"].items()}


def test_bert_masked_lm_plan_flops_equal_flop_counter_mode(plan_env):
    from transformers import AutoModelForMaskedLM, BertConfig

    config = BertConfig(**SMALL_BERT)
    r = plan_train(config, make_layout("trn2.3xlarge", 2, fsdp=2, dp=2), seq_len=64, micro_batch=2)
    assert (r["task"], r["auto_class"], r["seq_len"], r["fits"]) == ("masked-lm", "AutoModelForMaskedLM", 64, True)
    ids = torch.zeros(2, 64, dtype=torch.long)
    counted = _flops_on_meta(AutoModelForMaskedLM, config, input_ids=ids, labels=ids)
    assert sum(r["flops_by_category_per_micro_step"].values()) == sum(counted.values())
    assert r["tokens_per_s"] == pytest.approx(r["global_batch"] * 64 / r["step_time_s"])
    assert r["parameters"] == parameter_count(config, AutoModelForMaskedLM._model_mapping[BertConfig])


def test_vit_image_classification_plan_flops_equal_torch_formulas(plan_env):
    from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count
    from transformers import AutoModelForImageClassification, ViTConfig

    config = ViTConfig(**SMALL_VIT)
    r = plan_train(config, make_layout("trn2.3xlarge", 2, fsdp=4), micro_batch=2)
    assert (r["task"], r["image_size"], r["seq_len"]) == ("image-classification", 64, 16)   # (64 / 16)^2 patches
    counted = _flops_on_meta(AutoModelForImageClassification, config, pixel_values=torch.zeros(2, 3, 64, 64),
                             labels=torch.zeros(2, dtype=torch.long))
    flops = r["flops_by_category_per_micro_step"]
    # the linear layers and the patch convolution (forward and backward), as FlopCounterMode counts them
    assert flops["matmul"] == sum(n for op, n in counted.items() if op != "aten.bmm")
    # attention: torch's SDPA formulas over the 16 patches + the class token, per layer
    q = (2, 4, 17, 16)
    assert flops["attention"] == 2 * (sdpa_flop_count(q, q, q) + sdpa_backward_flop_count(q, q, q, q))


def test_selective_recompute_adds_the_attention_core_forward_and_full_the_layers(plan_env):
    from transformers import Qwen3Config

    config, layout = Qwen3Config(**TINY), make_layout("trn2.3xlarge", 2, dp=4)
    b, s, layers, heads, d, h, kv, i = 2, 256, 2, 4, 16, 64, 2, 128
    plans = {m: plan_train(config, layout, seq_len=s, micro_batch=b, activation_recompute=m)
             for m in ("none", "selective", "full")}
    flops = {m: p["flops_by_category_per_micro_step"] for m, p in plans.items()}
    core = layers * 4 * b * heads * s * s * d          # QK^T and PV of every layer, forward
    assert flops["selective"]["attention"] - flops["none"]["attention"] == core
    assert flops["selective"]["matmul"] == flops["none"]["matmul"]   # the linear layers are not recomputed
    # full: every layer's forward again, up to the last op whose output a backward needs: the down
    # projection's output is only added to the residual, so torch.utils.checkpoint stops before it
    recomputed = layers * b * s * 2 * (h * heads * d + 2 * h * kv * d + heads * d * h + 2 * h * i)
    assert flops["full"]["matmul"] - flops["none"]["matmul"] == recomputed
    assert flops["full"]["attention"] - flops["none"]["attention"] == core
    assert plans["full"]["peak_hbm_bytes_per_core"] < plans["none"]["peak_hbm_bytes_per_core"]
    assert plans["selective"]["activation_recompute"] == "selective" and not plans["selective"]["gradient_checkpointing"]


def test_torch_compile_plan_compiles_and_keeps_the_flops(tiny_config_dir, tmp_path):
    """The dry run of a compiled step: AOTAutograd's graphs are counted, and the FLOPs and the
    memory of the weights and AdamW state are the eager plan's (compilation fuses, it does not
    change the matmuls)."""
    def plan(*flags):
        out = tmp_path / f"plan{len(flags)}.json"
        p = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "train", "--config", tiny_config_dir,
                            "--instance", "trn2.3xlarge", "--seq-len", "64", "--quiet", "--json", str(out), *flags],
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
        return json.loads(out.read_text()), p.stdout

    eager, _ = plan()
    compiled, text = plan("--torch-compile")
    assert compiled["mode"].startswith("compiled") and "**compiled" in text and eager["mode"] == "eager"
    graphs = compiled["compiled_graphs"]
    assert graphs["graphs_compiled"] >= 1 and graphs["distinct_graphs_in_step"] >= 2   # a forward and its backward
    assert any(n.endswith(":backward") for n in graphs["graph_names"]) and eager["compiled_graphs"] is None
    assert compiled["flops_per_core"] == eager["flops_per_core"]
    for part in ("parameters", "optimizer_state", "gradients"):
        assert compiled["memory_breakdown_bytes_per_core"][part] == eager["memory_breakdown_bytes_per_core"][part]


def test_a_plan_that_does_not_fit_states_the_parameters(plan_env):
    """A model whose embedding (30 GiB) exceeds the 24 GiB of a core: the step never runs, and the
    report still states the model's parameter count."""
    from transformers import Qwen3Config

    config = Qwen3Config(**{**TINY, "num_hidden_layers": 1, "vocab_size": (30 << 30) // (TINY["hidden_size"] * 2)})
    r = plan_train(config, make_layout("trn2.3xlarge", 2, dp=4), seq_len=8)
    assert r["fits"] is False and r["step_time_s"] is None
    assert r["parameters"] == parameter_count(config) > 0


@pytest.mark.parametrize("config,flags,message", [
    (SMALL_BERT, ["--tp", "2"], "has no tensor-parallel plan in transformers"),
    (SMALL_BERT, ["--seq-len", "512"], "exceeds the model's max_position_embeddings=128"),
    ({**SMALL_VIT, "model_type": "vit"}, ["--task", "masked-lm"], "has no AutoModelForMaskedLM class"),
    (TINY, ["--activation-recompute", "some"], "--activation-recompute 'some' is not a recomputation mode"),
    (TINY, ["--gradient-checkpointing", "--activation-recompute", "selective"], "pass one of them"),
])
def test_bad_train_flags_name_the_fix(tmp_path, config, flags, message):
    config = {"model_type": "bert", **config} if config is SMALL_BERT else config
    config = {"model_type": "qwen3", **config} if config is TINY else config
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    p = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "train", "--config", str(path), "--instance",
                        "trn2.3xlarge", "--quiet", "--real", *flags], capture_output=True, text=True, timeout=600,
                       env={k: v for k, v in os.environ.items() if k != "TORCH_NEURONX_DRY_RUN"})
    assert p.returncode == 2 and message in p.stderr, p.stderr[-2000:]


def test_the_sft_command_with_torch_compile_plans_compiled(tmp_path):
    """examples/sft_neuron_example.py with --torch_compile true (TRL's default gradient
    checkpointing on): the dry run runs both optimizer steps through the compiled graphs, whose
    recomputed regions call torch's RNG ops under the dry run's modes, and says so."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = tmp_path / "sft.json"
    p = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "run", "--instance", "trn2.3xlarge", "--quiet",
                        "--json", str(out), "--", os.path.join(root, "examples", "sft_neuron_example.py"),
                        "--tiny_local_assets", str(tmp_path / "assets"), "--output_dir", str(tmp_path / "out"),
                        "--max_length", "64", "--per_device_train_batch_size", "2", "--max_steps", "2",
                        "--packing", "true", "--packing_strategy", "wrapped", "--dtype", "bfloat16",
                        "--torch_compile", "true", "--report_to", "none", "--save_only_model", "true"],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    r = json.loads(out.read_text())
    assert r["mode"] == "compiled graphs and eager ops between them" and r["optimizer_steps"] == 2
    assert r["compiled"]["distinct_graphs"] >= 2 and any(n.endswith(":backward") for n in r["compiled"]["graph_names"])
