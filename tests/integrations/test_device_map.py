"""docs/hf-inference.md: device_map="balanced" spreads the layers over the visible NeuronCores (as over
several GPUs) and "sequential" fills neuron:0 first; both give the CPU model's logits bit for bit."""
from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM

import torch_neuronx.integrations as integrations

IDS = torch.tensor([[5, 6, 7, 8, 9, 10]])


def _load(path, device_map, **kwargs):
    integrations.install()  # normally done at `import torch` (see test_detection)
    return AutoModelForCausalLM.from_pretrained(path, device_map=device_map, **kwargs).eval()


def _logits(model, device):
    with torch.no_grad():
        return model(IDS.to(device)).logits.cpu()


def test_balanced_spreads_layers_over_the_cores(tiny_model_path, cpu_model):
    model = _load(tiny_model_path, "balanced")
    placed = set(model.hf_device_map.values())
    assert len(placed) >= 2 and all(isinstance(d, int) and 0 <= d < torch.neuron.device_count() for d in placed), \
        model.hf_device_map
    assert {p.device.type for p in model.parameters()} == {"neuron"}
    assert torch.equal(_logits(model, "neuron:0"), _logits(cpu_model, "cpu"))


def test_sequential_fills_the_first_core_first(tiny_model_path, cpu_model):
    model = _load(tiny_model_path, "sequential")
    # the tiny model fits neuron:0 (one device: transformers records no hf_device_map)
    assert {str(p.device) for p in model.parameters()} == {"neuron:0"}
    assert torch.equal(_logits(model, "neuron:0"), _logits(cpu_model, "cpu"))
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    spilled = _load(tiny_model_path, "sequential", max_memory={0: size // 2, 1: 4 * size})
    placed = spilled.hf_device_map
    assert set(placed.values()) == {0, 1}, placed
    order = list(placed.values())
    assert order == sorted(order), placed  # core 0's layers, then core 1's: in module order
    assert torch.equal(_logits(spilled, "neuron:0"), _logits(cpu_model, "cpu"))
