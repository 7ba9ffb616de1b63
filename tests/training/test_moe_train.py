"""Mixture-of-experts language models train on neuron as on CPU: a tiny GPT-OSS and a tiny Qwen3-MoE
(random weights, saved and loaded back through `from_pretrained`), with transformers' default
"grouped_mm" experts (`torch._grouped_mm` forward and backward), three AdamW steps each."""
from __future__ import annotations

import pytest
import torch

STEPS = 3


def _train(path, device):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, device_map=device, dtype=torch.float32)
    assert model.config._experts_implementation == "grouped_mm"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ids = torch.randint(0, model.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(0))
    ids = ids.to(device)
    losses = []
    for _ in range(STEPS):
        out = model(input_ids=ids, labels=ids, output_router_logits=True)
        loss = out.loss  # includes the router's load-balancing loss (output_router_logits)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    weights = {n: p.detach().cpu() for n, p in model.named_parameters() if "experts" in n}
    return losses, weights


@pytest.mark.parametrize("arch", ["gpt_oss", "qwen3_moe"])
def test_moe_model_trains_on_neuron_as_on_cpu(arch, tmp_path):
    from torch_neuronx.integrations.tiny_models import build_tiny_model

    path = build_tiny_model(tmp_path / arch, arch)
    cpu_losses, cpu_experts = _train(path, "cpu")
    neuron_losses, neuron_experts = _train(path, "neuron")
    assert neuron_losses == cpu_losses, (cpu_losses, neuron_losses)
    assert cpu_losses[-1] < cpu_losses[0]
    assert cpu_experts.keys() == neuron_experts.keys() and cpu_experts
    for name, w in cpu_experts.items():
        assert torch.equal(neuron_experts[name], w), name
