"""Activation recomputation in `plan train`: none, full or selective.

full: every layer checkpointed (transformers' `gradient_checkpointing_enable`): the backward runs
each layer's forward again and only the layer inputs are held.

selective: Megatron-LM's `--recompute-granularity selective` (Korthikanti et al., "Reducing
Activation Recomputation in Large Transformer Models", 2022, section 4.2): only the attention core
(QK^T, softmax, dropout and the product with V) is checkpointed; the linear layers keep their
activations. The core's s x s scores are the activations that grow with the sequence, and it
holds few FLOPs next to the projections, so the extra forward is cheap. Here the model's own
attention function (transformers' AttentionInterface: SDPA or the modeling file's eager one)
runs inside `torch.utils.checkpoint` under a registered name, so every attention module of the
model runs it and the rest of the layer is untouched.
"""
from __future__ import annotations

import sys

import torch

MODES = ("none", "full", "selective")
PREFIX = "recompute_core:"   # the registered attention implementation: PREFIX + the model's own


def check(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"--activation-recompute {mode!r} is not a recomputation mode; use one of: {', '.join(MODES)}")
    return mode


def _original(name: str, module):
    """The attention function `name` stands for in `module`'s model ("eager": its modeling file's)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    if name == "eager":
        return sys.modules[type(module).__module__].eager_attention_forward
    return ALL_ATTENTION_FUNCTIONS[name]


def _checkpointed(name: str):
    def attention(module, query, key, value, attention_mask, **kwargs):
        fn = _original(name, module)
        return torch.utils.checkpoint.checkpoint(fn, module, query, key, value, attention_mask,
                                                 use_reentrant=False, **kwargs)

    return attention


def selective(model) -> str:
    """Checkpoint the attention core of every attention module of `model` (its config's attention
    implementation wrapped, under PREFIX + its name); returns the wrapped implementation's name."""
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, AttentionInterface

    name = model.config._attn_implementation or "eager"
    if name.startswith(PREFIX):
        return name
    wrapped = PREFIX + name
    if wrapped not in ALL_ATTENTION_FUNCTIONS:
        AttentionInterface.register(wrapped, _checkpointed(name))
        # the masks are built for the implementation's name: the wrapped one takes the original's
        AttentionMaskInterface.register(wrapped, ALL_MASK_ATTENTION_FUNCTIONS[name])
    for sub in model.modules():
        config = getattr(sub, "config", None)
        if config is not None and getattr(config, "_attn_implementation", None) == name:
            config._attn_implementation = wrapped
    return wrapped


def apply(model, mode: str) -> None:
    """Turn `mode`'s recomputation on for `model` (in training mode)."""
    if check(mode) == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    elif mode == "selective":
        selective(model)
