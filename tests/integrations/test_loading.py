"""from_pretrained with every form of device_map, and the bad-input messages."""
from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

import torch_neuronx.integrations as integrations


def _devices(model) -> set[str]:
    return {str(p.device) for p in model.parameters()}


@pytest.mark.parametrize("device_map,expected", [("neuron", {"neuron:0"}), ("neuron:1", {"neuron:1"}),
                                                 ({"": 0}, {"neuron:0"}), ({"": "neuron:2"}, {"neuron:2"})])
def test_device_map_places_weights_on_neuron(tiny_model_path, device_map, expected):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, device_map=device_map)
    assert _devices(model) == expected


def test_device_map_auto_uses_the_neuron_cores(tiny_model_path, cpu_model):
    integrations.install()  # normally done at `import torch` (see test_detection)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, device_map="auto")
    devices = _devices(model)
    assert devices and all(d.startswith("neuron") for d in devices), devices
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    out = model.generate(ids.to("neuron"), max_new_tokens=6, do_sample=False)
    assert torch.equal(out.cpu(), cpu_model.generate(ids, max_new_tokens=6, do_sample=False))


def test_device_map_auto_with_max_memory(tiny_model_path):
    integrations.install()
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, device_map="auto",
                                                 max_memory={1: "1GiB", "cpu": "1GiB"})
    assert _devices(model) == {"neuron:1"}
    with pytest.raises(ValueError, match=r"NeuronCore 9.*sees \d+ NeuronCore"):
        AutoModelForCausalLM.from_pretrained(tiny_model_path, device_map="auto", max_memory={9: "1GiB"})


def test_device_map_bad_index_names_device_count(tiny_model_path):
    count = torch.neuron.device_count()
    with pytest.raises(RuntimeError, match=rf"neuron:99.*{count} NeuronCore"):
        AutoModelForCausalLM.from_pretrained(tiny_model_path, device_map="neuron:99")


def test_split_across_cpu_and_neuron_works_through_accelerate_hooks(tiny_model_path, cpu_model):
    device_map = {"model.embed_tokens": "cpu", "model.layers": 0, "model.norm": 0, "model.rotary_emb": 0,
                  "lm_head": "cpu"}
    model = AutoModelForCausalLM.from_pretrained(tiny_model_path, device_map=device_map)
    # accelerate keeps CPU-offloaded weights on "meta" and streams them in with its hooks (as on CUDA)
    assert "neuron:0" in _devices(model) and _devices(model) <= {"cpu", "meta", "neuron:0"}
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    assert torch.equal(model.generate(ids, max_new_tokens=5, do_sample=False).cpu(),
                       cpu_model.generate(ids, max_new_tokens=5, do_sample=False))
