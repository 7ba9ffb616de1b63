"""vLLM on neuron, run in the vLLM environment (.ci/vllm; docs/serving.md): tiny models built from configs
with random weights, compared with transformers on the CPU."""
from __future__ import annotations

import gc
import os

import pytest
import torch

# The engine core runs in the test process (one start instead of a spawned engine process); tensor
# parallelism still spawns its workers.
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

PROMPTS = [
    "Hello! How are you today?",
    "The quick brown fox",
    "Tell me a short story about a robot who learns to paint. Tell me a short story about a robot",
    "0 1 2 3 4 5",
]
SHARED = "What is the capital of France? The capital of France is Paris. " * 8  # prefix-cache and chunking food
MAX_TOKENS = 12


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    """model type -> folder of a tiny model (head_dim 32: vLLM's CPU attention needs 32..512)."""
    from torch_neuronx.integrations.tiny_models import build_tiny_model

    built = {}

    def build(model_type: str, **overrides) -> str:
        key = (model_type, *sorted(overrides.items()))
        if key not in built:
            config = dict(hidden_size=128, intermediate_size=256, head_dim=32, num_attention_heads=4,
                          num_key_value_heads=2)
            config.update(overrides)
            built[key] = build_tiny_model(tmp_path_factory.mktemp(model_type), model_type, dtype=torch.bfloat16,
                                          **config)
        return built[key]

    return build


def greedy(tokens_per_prompt: int = MAX_TOKENS, **kwargs):
    from vllm import SamplingParams

    return SamplingParams(temperature=0.0, max_tokens=tokens_per_prompt, ignore_eos=True, **kwargs)


def transformers_greedy(path: str, prompts: list[str], dtype: torch.dtype, max_tokens: int = MAX_TOKENS):
    """Token ids transformers' `generate` picks on the CPU, prompt by prompt."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    model.generation_config.eos_token_id = None  # as vLLM's ignore_eos: EOS is a token like the others
    out = []
    for prompt in prompts:
        ids = tokenizer(prompt, return_tensors="pt").input_ids
        new = model.generate(ids, max_new_tokens=max_tokens, do_sample=False)
        out.append(new[0, ids.shape[1]:].tolist())
    return out


def token_ids(outputs) -> list[list[int]]:
    return [list(o.outputs[0].token_ids) for o in outputs]


@pytest.fixture
def make_llm():
    """LLM(...) with small serving limits; shut down after the test so the next one gets the core's memory."""
    made = []

    def make(model: str, **kwargs):
        from vllm import LLM

        settings = dict(max_model_len=256, max_num_seqs=8, max_num_batched_tokens=512, gpu_memory_utilization=0.05)
        settings.update(kwargs)
        llm = LLM(model=model, **settings)
        made.append(llm)
        return llm

    yield make
    for llm in made:
        llm.llm_engine.engine_core.shutdown()
    made.clear()
    gc.collect()
