"""Tiny configs for the model-level plan tests (built offline, saved with save_pretrained)."""
from __future__ import annotations

import pytest

TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            intermediate_size=128, vocab_size=256, tie_word_embeddings=False)


@pytest.fixture(scope="session")
def tiny_config_dir(tmp_path_factory):
    from transformers import Qwen3Config

    path = tmp_path_factory.mktemp("tiny_qwen3")
    Qwen3Config(**TINY).save_pretrained(path)
    return str(path)


@pytest.fixture
def plan_env(monkeypatch):
    """The CLI sets the instance, LNC and dry-run variables for its runtime: keep them to the test."""
    for name in ("TORCH_NEURONX_INSTANCE_TYPE", "NEURON_LOGICAL_NC_CONFIG", "TORCH_NEURONX_DRY_RUN"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch
