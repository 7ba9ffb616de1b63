"""TorchTitan configs for neuron: TorchTitan's own Qwen3, DeepSeek-V3 and GPT-OSS configs with `varlen` attention.

    torchrun --nproc-per-node=2 examples/torchtitan_llama3_debug.py \\
        --module torchtitan_neuron_configs --config qwen3_debugmodel_varlen

TorchTitan loads a config registry from any importable module (`--module a.b`, then `--config NAME`
calls `NAME()` there); nothing in TorchTitan is changed. Each function below returns TorchTitan's own
config of the same name without the suffix, with the model built by TorchTitan's `model_registry` for
that flavor and `attn_backend="varlen"`: the Qwen3 and DeepSeek-V3 registries default to FlexAttention,
which torch 2.13 accepts only on CUDA/CPU/XPU/HPU/MPS tensors and cannot differentiate on CPU, so neither
neuron nor a CPU reference could train it. varlen is the attention GPT-OSS already uses by default and
runs on neuron through `aten::_flash_attention_forward/_backward` (torch_neuronx/kernels/flash_varlen.py).
The full-size flavors keep TorchTitan's published dimensions (its `model_registry` tables, which follow
the models' Hugging Face configs), for `python -m torch_neuronx.plan run`.
"""
from __future__ import annotations


def _varlen(config, registry, flavor: str, **kwargs):
    config.model_spec = registry(flavor, attn_backend="varlen", **kwargs)
    config.training.disable_cuda_graphs = True  # as TorchTitan's own llama3_debugmodel_varlen_attn
    return config


def qwen3_debugmodel_varlen():
    from torchtitan.models.qwen3 import config_registry, model_registry

    return _varlen(config_registry.qwen3_debugmodel(), model_registry, "debugmodel")


def qwen3_moe_debug_varlen():
    from torchtitan.models.qwen3 import config_registry, model_registry

    return _varlen(config_registry.qwen3_moe_debug(), model_registry, "debugmodel_moe")


def qwen3_32b_varlen():
    from torchtitan.models.qwen3 import config_registry, model_registry

    return _varlen(config_registry.qwen3_32b(), model_registry, "32B")


def deepseek_v3_debugmodel_varlen():
    from torchtitan.models.deepseek_v3 import config_registry, model_registry

    return _varlen(config_registry.deepseek_v3_debugmodel(), model_registry, "debugmodel")


def deepseek_v3_16b_varlen():
    from torchtitan.models.deepseek_v3 import config_registry, model_registry

    return _varlen(config_registry.deepseek_v3_16b(), model_registry, "16B")


def deepseek_v3_671b_varlen():
    from torchtitan.models.deepseek_v3 import config_registry, model_registry

    return _varlen(config_registry.deepseek_v3_671b(), model_registry, "671B")
