"""Greedy and sampling, dynamic cache (eager) and static cache (decode compiled
with backend "neuron"), prefill_chunk_size, left padding with pad_to_multiple_of, bf16. Greedy tokens
must equal CPU's for the same weights."""
from __future__ import annotations

import warnings

import torch
from transformers import AutoModelForCausalLM, CompileConfig

import torch_neuronx
import torch_neuronx.integrations as integrations

NEW = 12


def _greedy(model, batch, device, **kwargs):
    inputs = {k: v.to(device) for k, v in batch.items()}
    with torch.no_grad():
        out = model.generate(**inputs, do_sample=False, max_new_tokens=NEW, **kwargs)
    return out.cpu()


def test_greedy_dynamic_cache_left_padded_equals_cpu(cpu_model, neuron_model, chat_batch):
    assert chat_batch["input_ids"].shape[1] % 8 == 0 and (chat_batch["attention_mask"][:, 0] == 0).any()
    before = torch_neuronx.get_dynamo_metrics()["graphs_compiled"]
    got = _greedy(neuron_model, chat_batch, "neuron")
    assert torch.equal(got, _greedy(cpu_model, chat_batch, "cpu"))
    assert torch_neuronx.get_dynamo_metrics()["graphs_compiled"] == before  # dynamic cache stays eager


def test_sampling_is_seeded_and_valid(neuron_model, chat_batch):
    inputs = {k: v.to("neuron") for k, v in chat_batch.items()}
    runs = []
    for _ in range(2):
        torch.manual_seed(123)
        out = neuron_model.generate(**inputs, do_sample=True, top_k=20, temperature=0.9, max_new_tokens=NEW)
        runs.append(out.cpu())
    assert torch.equal(runs[0], runs[1])
    assert runs[0].shape == (2, chat_batch["input_ids"].shape[1] + NEW)
    assert int(runs[0].max()) < neuron_model.config.vocab_size


def test_static_cache_decode_is_compiled_with_neuron_backend(cpu_model, neuron_model, chat_batch):
    torch_neuronx.reset_dynamo_metrics()
    got = _greedy(neuron_model, chat_batch, "neuron", cache_implementation="static")
    m = torch_neuronx.get_dynamo_metrics()
    compiled = m["graphs_compiled"] + m["cache_hits_memory"] + m["cache_hits_disk"]
    assert compiled >= 1 and m["fallbacks"] == 0, m
    assert torch.equal(got, _greedy(cpu_model, chat_batch, "cpu", cache_implementation="static"))
    assert torch.equal(got, _greedy(cpu_model, chat_batch, "cpu"))
    # same shapes again: no recompilation
    torch_neuronx.reset_dynamo_metrics()
    again = _greedy(neuron_model, chat_batch, "neuron", cache_implementation="static")
    assert torch.equal(again, got)
    assert torch_neuronx.get_dynamo_metrics()["recompilations"] == 0


def test_prefill_chunk_size_with_static_cache_equals_cpu(cpu_model, neuron_model, chat_batch):
    kwargs = dict(cache_implementation="static", prefill_chunk_size=8, cache_config={"max_cache_len": 64})
    got = _greedy(neuron_model, chat_batch, "neuron", **kwargs)
    assert torch.equal(got, _greedy(cpu_model, chat_batch, "cpu"))


def test_bf16_greedy_equals_cpu_bf16(tiny_model_path, chat_batch):
    cpu = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.bfloat16)
    dev = AutoModelForCausalLM.from_pretrained(tiny_model_path, dtype=torch.bfloat16, device_map="neuron")
    assert next(dev.parameters()).dtype == torch.bfloat16
    assert torch.equal(_greedy(dev, chat_batch, "neuron"), _greedy(cpu, chat_batch, "cpu"))


def test_compile_requested_with_dynamic_cache_explains_why_not(neuron_model, chat_batch):
    integrations.install()  # normally done at `import torch` (see test_detection)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _greedy(neuron_model, chat_batch, "neuron", compile_config=CompileConfig(backend="neuron"))
    messages = [str(w.message) for w in caught]
    assert any("dynamic cache" in m and "cache_implementation='static'" in m for m in messages), messages
