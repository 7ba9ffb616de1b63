"""A tiny Qwen-Image-2.1 pipeline built offline from configs with random weights.

`build(path)` writes a complete pipeline folder (2-layer transformer, small VAE, scheduler) with
`save_pretrained`; `load(path, **kwargs)` reads it back with the real `from_pretrained`, passing the
components that cannot be saved: no text encoder (prompt embeddings are computed on CPU by
`prompt_embeds`) and a text-only stand-in for `Qwen3VLProcessor` (which needs torchvision).
"""
from __future__ import annotations

import os

import torch

# prompt embedding width of the tiny transformer (context_in_dim)
CONTEXT_DIM = 32
HEADS = 8  # divisible by TP degrees 1, 2, 4, 8


class _StubTokenizer:
    """Just what QwenImage21Pipeline.__init__ reads: the id of <|image_pad|>."""

    def encode(self, text, *args, **kwargs):
        return [151655] if text == "<|image_pad|>" else [ord(c) % 1000 for c in text]


class TextOnlyProcessor:
    """Stand-in for Qwen3VLProcessor where torchvision is missing. The pipeline's __init__ only asks it
    for the length of the tokenized system message and the image-pad id; generation passes
    `prompt_embeds`, so it never tokenizes a prompt."""

    def __init__(self):
        self.tokenizer = _StubTokenizer()

    def apply_chat_template(self, messages, tokenize=True, return_dict=False, **kwargs):
        text = "".join(part["text"] for m in messages for part in m["content"] if part.get("type") == "text")
        return [list(range(len(text.split()) + 4))]

    def __call__(self, *args, **kwargs):
        raise RuntimeError("TextOnlyProcessor cannot tokenize prompts: pass prompt_embeds (computed on CPU) "
                           "or install torchvision and load the real Qwen3VLProcessor")


def build(path: str, num_layers: int = 2, seed: int = 0) -> str:
    from diffusers import (AutoencoderKLQwenImage21, FlowMatchEulerDiscreteScheduler, QwenImage21Pipeline,
                           QwenImage21Transformer2DModel)

    torch.manual_seed(seed)
    transformer = QwenImage21Transformer2DModel(
        patch_size=1, in_channels=16, out_channels=16, num_layers=num_layers, attention_head_dim=16,
        num_attention_heads=HEADS, context_in_dim=CONTEXT_DIM, mlp_ratio=2, axes_dims_rope=(4, 6, 6))
    defaults = AutoencoderKLQwenImage21.__init__.__defaults__
    vae = AutoencoderKLQwenImage21(base_dim=8, decoder_base_dim=8, z_dim=16, dim_mult=[1, 1, 1, 1, 1],
                                   num_res_blocks=1, latents_mean=[0.0] * 16, latents_std=[1.0] * 16,
                                   in_channels=4, out_channels=4)
    del defaults
    scheduler = FlowMatchEulerDiscreteScheduler(use_dynamic_shifting=True, base_shift=0.5, max_shift=1.15,
                                                base_image_seq_len=256, max_image_seq_len=4096, shift_terminal=0.02)
    pipe = QwenImage21Pipeline(scheduler=scheduler, vae=vae, text_encoder=None, processor=TextOnlyProcessor(),
                               transformer=transformer)
    os.makedirs(path, exist_ok=True)
    pipe.save_pretrained(path, safe_serialization=True)
    return path


def load(path: str, **kwargs):
    from diffusers import QwenImage21Pipeline

    kwargs.setdefault("text_encoder", None)
    kwargs.setdefault("processor", TextOnlyProcessor())
    return QwenImage21Pipeline.from_pretrained(path, **kwargs)


def prompt_embeds(seed: int = 0, tokens: int = 7, dim: int = CONTEXT_DIM) -> torch.Tensor:
    """Prompt embeddings as the CPU text encoder would produce them (random, reproducible), `dim` wide
    (the transformer's context_in_dim)."""
    g = torch.Generator("cpu").manual_seed(seed)
    return torch.randn(1, tokens, dim, generator=g)
