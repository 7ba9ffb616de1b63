"""LoRA fine-tuning on neuron with PEFT, through TRL's SFTTrainer and a manual loop.

Reference is the same code on CPU. Adapters are saved both unmerged (the PeftModel's adapter files) and
merged into the base weights, then reloaded on CPU with the standard loaders.
"""
from __future__ import annotations

import json
import os

import pytest
import torch

from tests.training.sft_harness import sft, sft_all

FP32 = ("--dtype", "float32", "--bf16", "false")
# TRL's ModelConfig flags, passed through the example's get_peft_config(model_args) unchanged. No LoRA
# dropout: neuron and CPU draw different dropout masks, and the runs are compared step by step.
LORA_FLAGS = ("--use_peft", "true", "--lora_r", "8", "--lora_alpha", "16", "--lora_dropout", "0.0",
              "--lora_target_modules", "q_proj", "v_proj", "--learning_rate", "1e-2")


def test_sft_trainer_with_peft_config_matches_cpu_and_saves_adapter(assets, sft_root):
    """SFTTrainer(peft_config=LoraConfig) on neuron: same per-step losses as on CPU, and save_model writes
    only the adapter, which PeftModel.from_pretrained reloads on CPU over the untouched base model."""
    neuron_dir, cpu_dir = str(sft_root / "peft-neuron"), str(sft_root / "peft-cpu")
    runs = sft_all(assets, {"neuron": (neuron_dir, (*FP32, *LORA_FLAGS), {}),  # both at once
                            "cpu": (cpu_dir, (*FP32, *LORA_FLAGS, "--use_cpu", "true"), {})})
    (neuron, _), (cpu, _) = runs["neuron"], runs["cpu"]
    assert neuron["device"] == "neuron:0" and cpu["device"] == "cpu"
    assert neuron["losses"] == cpu["losses"]  # docs/training.md: identical
    assert neuron["losses"][-1] < neuron["losses"][0]  # the adapter learns

    files = set(os.listdir(neuron_dir))
    assert {"adapter_config.json", "adapter_model.safetensors"} <= files, sorted(files)
    assert "model.safetensors" not in files, sorted(files)  # the base weights were not trained
    with open(os.path.join(neuron_dir, "adapter_config.json")) as f:
        adapter_config = json.load(f)
    assert adapter_config["r"] == 8 and sorted(adapter_config["target_modules"]) == ["q_proj", "v_proj"]

    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    ids = torch.arange(3, 40).unsqueeze(0)
    logits = {}
    for name, path in (("neuron", neuron_dir), ("cpu", cpu_dir)):
        base = AutoModelForCausalLM.from_pretrained(os.path.join(assets, "model"))
        model = PeftModel.from_pretrained(base, path).eval()
        assert model.device.type == "cpu"
        with torch.no_grad():
            logits[name] = model(ids).logits
    base = AutoModelForCausalLM.from_pretrained(os.path.join(assets, "model")).eval()
    with torch.no_grad():
        base_logits = base(ids).logits
    assert (logits["neuron"] - logits["cpu"]).abs().max().item() <= 1e-5
    assert (logits["neuron"] - base_logits).abs().max().item() > 1e-3  # the adapter is not a no-op


def _lora_model(model_dir: str, device: str, initial_adapter: dict | None):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to(device)
    config = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, task_type="CAUSAL_LM",
                        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "down_proj"])
    model = get_peft_model(base, config)
    if initial_adapter is not None:
        # LoRA A is random at creation and each device has its own generator: start both runs from the
        # same adapter so that the comparison is about the training steps.
        missing = model.load_state_dict({k: v.to(device) for k, v in initial_adapter.items()}, strict=False)
        assert not missing.unexpected_keys, missing.unexpected_keys
    return model


def _train(model, device: str, batches: list[torch.Tensor], steps: int = 4) -> list[float]:
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    model.train()
    losses = []
    for step in range(steps):
        ids = batches[step % len(batches)].to(device)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses


def _adapter_state(model) -> dict:
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items() if "lora_" in k}


@pytest.fixture(scope="module")
def manual_lora(assets, tmp_path_factory):
    """Train a LoRA adapter on neuron and on CPU in a plain PyTorch loop; save the neuron one both ways."""
    model_dir = os.path.join(assets, "model")
    generator = torch.Generator().manual_seed(0)
    with open(os.path.join(model_dir, "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    batches = [torch.randint(3, vocab, (2, 32), generator=generator) for _ in range(2)]
    probe = torch.randint(3, vocab, (1, 24), generator=generator)

    neuron_model = _lora_model(model_dir, "neuron", None)
    assert next(neuron_model.parameters()).device.type == "neuron"
    initial = _adapter_state(neuron_model)
    base_before = {k: v.detach().cpu().clone() for k, v in neuron_model.state_dict().items() if "lora_" not in k}
    neuron_losses = _train(neuron_model, "neuron", batches)
    trained = _adapter_state(neuron_model)
    cpu_losses = _train(_lora_model(model_dir, "cpu", initial), "cpu", batches)

    neuron_model.eval()
    with torch.no_grad():
        unmerged_logits = neuron_model(probe.to("neuron")).logits.cpu()
    base_after = {k: v.detach().cpu() for k, v in neuron_model.state_dict().items() if "lora_" not in k}
    out = tmp_path_factory.mktemp("manual-lora")
    neuron_model.save_pretrained(str(out / "adapter"))
    merged = neuron_model.merge_and_unload()
    with torch.no_grad():
        merged_logits = merged(probe.to("neuron")).logits.cpu()
    merged.save_pretrained(str(out / "merged"))
    return {"model_dir": model_dir, "out": out, "probe": probe, "neuron_losses": neuron_losses,
            "cpu_losses": cpu_losses, "unmerged_logits": unmerged_logits, "merged_logits": merged_logits,
            "base_before": base_before, "base_after": base_after, "initial": initial, "trained": trained}


def test_manual_lora_loop_losses_match_cpu(manual_lora):
    neuron, cpu = manual_lora["neuron_losses"], manual_lora["cpu_losses"]
    assert neuron == cpu  # docs/training.md: identical on both
    assert neuron[-1] < neuron[0], neuron
    # only the adapter trains: every base weight is bit-identical after the steps
    before, after = manual_lora["base_before"], manual_lora["base_after"]
    assert sorted(before) == sorted(after)
    assert all(torch.equal(before[k], after[k]) for k in before)
    initial, trained = manual_lora["initial"], manual_lora["trained"]
    assert trained and sorted(trained) == sorted(initial)
    assert any(not torch.equal(initial[k], trained[k]) for k in trained)  # the adapter itself moved


def test_unmerged_adapter_reloads_on_cpu_with_same_outputs(manual_lora):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    adapter_dir = manual_lora["out"] / "adapter"
    assert {"adapter_config.json", "adapter_model.safetensors"} <= set(os.listdir(adapter_dir))
    base = AutoModelForCausalLM.from_pretrained(manual_lora["model_dir"])
    model = PeftModel.from_pretrained(base, str(adapter_dir)).eval()
    assert next(model.parameters()).device.type == "cpu"
    with torch.no_grad():
        logits = model(manual_lora["probe"]).logits
    # docs/training.md: the CPU reload reproduces the neuron logits exactly
    assert torch.equal(logits, manual_lora["unmerged_logits"])
    with model.disable_adapter(), torch.no_grad():
        base_logits = model(manual_lora["probe"]).logits
    assert (logits - base_logits).abs().max().item() > 1e-3  # the reloaded adapter changes the outputs


def test_merged_adapter_reloads_on_cpu_as_plain_model_with_same_outputs(manual_lora):
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM

    merged_dir = manual_lora["out"] / "merged"
    with safe_open(str(merged_dir / "model.safetensors"), "pt") as f:
        names = list(f.keys())
    assert names and not any("lora_" in n or "base_layer" in n for n in names), names[:8]
    model = AutoModelForCausalLM.from_pretrained(str(merged_dir)).eval()
    assert model.device.type == "cpu"
    with torch.no_grad():
        logits = model(manual_lora["probe"]).logits
    assert torch.equal(logits, manual_lora["merged_logits"])  # docs/training.md: exactly
    # merging on neuron did not change what the model computes
    assert (manual_lora["merged_logits"] - manual_lora["unmerged_logits"]).abs().max().item() <= 1e-5
