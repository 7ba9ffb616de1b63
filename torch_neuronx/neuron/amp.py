"""Automatic mixed precision support of torch.neuron."""
from __future__ import annotations

import torch


def get_amp_supported_dtype() -> list[torch.dtype]:
    """Dtypes torch.autocast("neuron", dtype=...) accepts."""
    return [torch.float32, torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Trainium computes natively in bf16."""
    return True


def is_fp16_supported() -> bool:
    return True


def is_autocast_enabled() -> bool:
    return torch.is_autocast_enabled("neuron")


def get_autocast_dtype() -> torch.dtype:
    return torch.get_autocast_dtype("neuron")
