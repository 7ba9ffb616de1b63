"""vLLM's engine on neuron picks the tokens transformers picks on the CPU (greedy), and seeded sampling picks
what vLLM's own CPU platform picks for the same seed.

In bf16 the first token of each prompt is compared with transformers, not the whole continuation: vLLM's CPU
kernels (oneDNN GEMMs accumulating in fp32, fused RMSNorm and rotary) round differently from transformers'
op-by-op bf16, and a random tiny model's near-ties then go either way a few tokens in."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from .conftest import MAX_TOKENS, PROMPTS, SHARED, greedy, token_ids, transformers_greedy

pytestmark = pytest.mark.vllm

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_llama_batched_prefix_cached_chunked_equals_transformers(model_dir, make_llm):
    """Continuous batching (8 requests, 3 slots), chunked prefill (32-token steps, prompts up to ~70 tokens)
    and prefix caching (the second half of the requests share a cached prefix) change nothing."""
    path = model_dir("llama")
    llm = make_llm(path, dtype="float32", max_model_len=512, max_num_seqs=3, max_num_batched_tokens=32, block_size=32,
                   enable_chunked_prefill=True, enable_prefix_caching=True)
    assert str(llm.llm_engine.vllm_config.device_config.device) == "neuron"
    prompts = PROMPTS + [SHARED + p for p in PROMPTS]
    llm.generate([SHARED], greedy(1))  # puts the shared prefix in the cache
    outputs = llm.generate(prompts, greedy())
    assert token_ids(outputs) == transformers_greedy(path, prompts, torch.float32)
    assert all(o.num_cached_tokens > 0 for o in outputs[len(PROMPTS):])  # the shared prefix came from the cache


def test_qwen3_fp32_equals_transformers(model_dir, make_llm):
    path = model_dir("qwen3")
    llm = make_llm(path, dtype="float32")
    assert token_ids(llm.generate(PROMPTS, greedy())) == transformers_greedy(path, PROMPTS, torch.float32)


def test_qwen3_moe_fp32_equals_transformers(model_dir, make_llm):
    """A mixture-of-experts model (8 experts, top 2) takes vLLM's CPU fused-MoE path on device memory."""
    path = model_dir("qwen3_moe", moe_intermediate_size=64, num_experts=8, num_experts_per_tok=2)
    llm = make_llm(path, dtype="float32")
    assert token_ids(llm.generate(PROMPTS, greedy())) == transformers_greedy(path, PROMPTS, torch.float32)


def test_llama_bf16_first_tokens_equal_transformers(model_dir, make_llm):
    path = model_dir("llama")
    llm = make_llm(path, dtype="bfloat16")
    first = [t[:1] for t in token_ids(llm.generate(PROMPTS, greedy(1)))]
    assert first == transformers_greedy(path, PROMPTS, torch.bfloat16, max_tokens=1)


_SAMPLED = """
import json, sys
from vllm import LLM, SamplingParams
llm = LLM(model=sys.argv[1], dtype="float32", max_model_len=256, max_num_seqs=8, max_num_batched_tokens=512,
          gpu_memory_utilization=0.05)
prompts = json.loads(sys.argv[2])
greedy = SamplingParams(temperature=0.0, max_tokens=%d, ignore_eos=True)
seeded = [SamplingParams(temperature=1.0, top_p=0.9, seed=seed, max_tokens=%d, ignore_eos=True) for seed in (1, 2, 3, 4)]
tokens = [[list(o.outputs[0].token_ids) for o in llm.generate(prompts, params)] for params in (greedy, seeded)]
print("TOKENS", json.dumps(tokens))
""" % (MAX_TOKENS, MAX_TOKENS)


def _sampled_on(platform_plugins: str | None, path: str) -> list[list[list[int]]]:
    """[greedy tokens, seeded tokens] of each prompt, in a fresh process (the platform is chosen once a process)."""
    env = dict(os.environ, PYTHONPATH=REPO, VLLM_ENABLE_V1_MULTIPROCESSING="0")
    if platform_plugins is not None:
        env["VLLM_PLUGINS"] = platform_plugins
    run = subprocess.run([sys.executable, "-c", _SAMPLED, path, json.dumps(PROMPTS)], env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    line = next(line for line in run.stdout.splitlines() if line.startswith("TOKENS "))
    return json.loads(line[len("TOKENS "):])


def test_greedy_and_seeded_equal_vllm_cpu_platform(model_dir):
    """VLLM_PLUGINS=none leaves vLLM's own CPU platform; the neuron plugin must reproduce its greedy choices and
    its seeded draws."""
    path = model_dir("llama")
    greedy_neuron, seeded_neuron = _sampled_on(None, path)
    greedy_cpu, seeded_cpu = _sampled_on("none", path)
    assert greedy_neuron == greedy_cpu
    assert seeded_neuron == seeded_cpu
    assert seeded_neuron != greedy_neuron and len({tuple(t) for t in seeded_neuron}) > 1  # the seeds are used
