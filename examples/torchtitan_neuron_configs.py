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


import importlib


def _varlen(model: str, config: str, flavor: str):
    """The config function ``<config>_varlen``: TorchTitan's ``config_registry.<config>()`` of
    ``torchtitan.models.<model>``, its model built by that model's registry for ``flavor``."""
    def build():
        # the submodule by name: `torchtitan.models.<model>` does not import its `config_registry`, and
        # nothing else does in a fresh process (torchtitan.train imports only the module `--module` names)
        registry = importlib.import_module(f"torchtitan.models.{model}.config_registry")
        models = importlib.import_module(f"torchtitan.models.{model}")
        built = getattr(registry, config)()
        built.model_spec = models.model_registry(flavor, attn_backend="varlen")
        built.training.disable_cuda_graphs = True  # as TorchTitan's own llama3_debugmodel_varlen_attn
        return built
    build.__name__ = build.__qualname__ = f"{config}_varlen"
    return build


qwen3_debugmodel_varlen = _varlen("qwen3", "qwen3_debugmodel", "debugmodel")
qwen3_moe_debug_varlen = _varlen("qwen3", "qwen3_moe_debug", "debugmodel_moe")
qwen3_32b_varlen = _varlen("qwen3", "qwen3_32b", "32B")
deepseek_v3_debugmodel_varlen = _varlen("deepseek_v3", "deepseek_v3_debugmodel", "debugmodel")
deepseek_v3_16b_varlen = _varlen("deepseek_v3", "deepseek_v3_16b", "16B")
deepseek_v3_671b_varlen = _varlen("deepseek_v3", "deepseek_v3_671b", "671B")
