"""--tensor-parallel-size 2: two workers on neuron:0 and neuron:1 over the c10d backend `neuron` pick the
tokens transformers picks on the CPU."""
from __future__ import annotations

import pytest
import torch

from .conftest import PROMPTS, greedy, token_ids, transformers_greedy

pytestmark = pytest.mark.vllm


def test_tp2_equals_transformers(model_dir, make_llm):
    path = model_dir("llama")
    llm = make_llm(path, dtype="float32", tensor_parallel_size=2)
    config = llm.llm_engine.vllm_config
    assert config.parallel_config.tensor_parallel_size == 2 and config.parallel_config.world_size == 2
    assert token_ids(llm.generate(PROMPTS, greedy())) == transformers_greedy(path, PROMPTS, torch.float32)
