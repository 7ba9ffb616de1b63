"""ATen kernels of the neuron device written in Python (torch.library).

Each file registers the PrivateUse1 kernels of one part of PyTorch's backend
contract that the C++ core does not cover: ops whose only in-tree kernels are
CUDA ones, or that PyTorch asks every backend to answer for itself. Python is
used where the per-call cost is small next to the op (once per parameter move,
once per RNN time step, once per attention call).

Public (``__all__``, for the layers above): ``register()`` (called at registration) and
``output_shapes(op_name)`` (how the planner shapes an op without running it). The kernel files
(shallow_copy, rnn_cells, sdpa_overrideable, flash_varlen, grouped_mm,
scaled_mm) are internal.
"""
from __future__ import annotations

import torch

__all__ = ["output_shapes", "register"]

_LIB: list[torch.library.Library] = []  # kept alive: dropping a Library unregisters it


def output_shapes(op_name: str):
    """The function giving `op_name`'s outputs on neuron where they are shaped unlike PyTorch's meta
    kernel says (called with the op's arguments, it returns empty outputs on their device), else None."""
    from . import flash_varlen, scaled_mm

    return flash_varlen.SHAPES.get(op_name) or scaled_mm.SHAPES.get(op_name)


def register() -> None:
    if _LIB:
        return
    lib = torch.library.Library("aten", "IMPL")
    _LIB.append(lib)
    from . import flash_varlen, grouped_mm, rnn_cells, scaled_mm, sdpa_overrideable, shallow_copy

    shallow_copy.register(lib)
    rnn_cells.register(lib)
    sdpa_overrideable.register(lib)
    flash_varlen.register(lib)
    grouped_mm.register(lib)
    scaled_mm.register(lib)
