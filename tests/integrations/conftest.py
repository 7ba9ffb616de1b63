"""Fixtures of the Hugging Face integration tests: one tiny Llama-style model + tokenizer, built once
offline and saved, then loaded through the real `from_pretrained` path by each test."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory):
    from torch_neuronx.integrations.tiny_models import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_path)


@pytest.fixture(scope="session")
def cpu_model(tiny_model_path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_path).eval()


@pytest.fixture(scope="session")
def neuron_model(tiny_model_path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_path, device_map="neuron").eval()


@pytest.fixture(scope="session")
def chat_batch(tiny_tokenizer):
    """Two chat prompts of different lengths, left padded to a multiple of 8."""
    messages = [[{"role": "user", "content": "What is the capital of France?"}],
                [{"role": "user", "content": "Hi"}]]
    texts = tiny_tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tiny_tokenizer(texts, return_tensors="pt", padding=True, pad_to_multiple_of=8)
