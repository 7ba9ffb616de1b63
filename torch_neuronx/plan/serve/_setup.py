"""vLLM's engine for a planned deployment, configured as `vllm serve` configures it.

`EngineArgs` (vLLM's own flags and defaults, usage context `OPENAI_API_SERVER` as the server sets it)
becomes the `VllmConfig`; its model config reads the Hugging Face config of `--config` (no tokenizer,
no weights). vLLM checks what it checks for a server: the tensor-parallel size against the heads, the
max model length against the config, and, once the executor reports the memory a rank leaves to
the KV cache, whether one request of max-model-len fits it (its own error message, which names
`max_model_len` and the memory share).
"""
from __future__ import annotations

import json
import os
import tempfile


def config_folder(config: str) -> str:
    """A folder holding `config` as config.json: what vLLM's model config reads."""
    if os.path.isdir(config):
        return config
    folder = tempfile.mkdtemp(prefix="plan-serve-")
    with open(config) as f:
        data = json.load(f)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(data, f)
    return folder


# vLLM's server defaults for an accelerator with less than 70 GiB of memory (vllm/engine/arg_utils.py,
# `get_batch_defaults`: 2048 batched tokens, 256 sequences), as a logical NeuronCore has. The planning
# host's own vLLM platform would give its CPU defaults instead (2048 tokens and 128 sequences per TP rank).
SERVER_DEFAULTS = {"max_num_batched_tokens": 2048, "max_num_seqs": 256}


def vllm_config(folder: str, executor, *, dtype: str, tp: int, max_model_len: int | None, max_num_seqs: int | None,
                max_num_batched_tokens: int | None, block_size: int | None, gpu_memory_utilization: float | None,
                enable_prefix_caching: bool | None, enable_chunked_prefill: bool | None):
    """vLLM's VllmConfig for the deployment (None: vLLM's default for a server; SERVER_DEFAULTS for the
    batch limits)."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.usage.usage_lib import UsageContext

    given = {"max_model_len": max_model_len, "max_num_seqs": max_num_seqs,
             "max_num_batched_tokens": max_num_batched_tokens, "block_size": block_size,
             "gpu_memory_utilization": gpu_memory_utilization, "enable_prefix_caching": enable_prefix_caching,
             "enable_chunked_prefill": enable_chunked_prefill}
    for name, value in SERVER_DEFAULTS.items():
        given[name] = value if given[name] is None else given[name]
    args = EngineArgs(model=folder, skip_tokenizer_init=True, load_format="dummy", dtype=dtype,
                      tensor_parallel_size=tp, distributed_executor_backend=executor,
                      **{k: v for k, v in given.items() if v is not None})
    return args.create_engine_config(UsageContext.OPENAI_API_SERVER)


def attention_specs(layers: int, kv_heads_per_rank: int, head_dim: int):
    """{layer name: KVCacheSpec} of one TP rank: full attention in every decoder layer."""
    from vllm.v1.kv_cache_interface import FullAttentionSpec

    def specs(vllm_config) -> dict:
        spec = FullAttentionSpec(block_size=vllm_config.cache_config.block_size, num_kv_heads=kv_heads_per_rank,
                                 head_size=head_dim, dtype=vllm_config.model_config.dtype)
        return {f"model.layers.{i}.self_attn.attn": spec for i in range(layers)}
    return specs


def engine_core(vllm_config, executor):
    """vLLM's EngineCore on `executor`: KV cache sized, scheduler built."""
    from vllm.v1.engine.core import EngineCore

    return EngineCore(vllm_config, executor, log_stats=False)
