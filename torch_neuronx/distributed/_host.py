"""Host views of neuron tensors: what gloo reads and writes.

A neuron tensor lives in host memory; `_cpu_alias` returns a CPU tensor over the
same bytes (same sizes, strides and offset), so a collective that writes the
alias writes the neuron tensor itself.
"""
from __future__ import annotations

import torch

from .. import _C

_alias = _C._cpu_alias
_NEURON = "neuron"


def host(t: torch.Tensor) -> torch.Tensor:
    return _alias(t) if t.device.type == _NEURON else t


def host_list(tensors) -> list[torch.Tensor]:
    return [_alias(t) if t.device.type == _NEURON else t for t in tensors]


def host_lists(lists) -> list[list[torch.Tensor]]:
    return [host_list(ts) for ts in lists]
