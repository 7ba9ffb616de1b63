"""Op tracking as TorchNeuron documents it: which ATen ops ran on the device,
how often, and which of them fell back.

What "fallback" means on the virtual NeuronCore: every op runs as a host
kernel here, so fallback is defined by the op, not by where it ran. The
*neuron op set* is the set of ops TorchNeuron lowers to the device: PyTorch's
Core ATen IR (ops tagged `torch.Tag.core`, the opset ATen-to-StableHLO
lowerings cover) with their in-place and out= variants, plus the ops that have
an explicit neuron kernel in this package (matmul family, attention, copies,
creation, views). An executed op outside that set is a *fallback op*: on
Trainium it would run on the host CPU (TorchNeuron's CPU fallback).

Counting is in C++ (csrc/op_tracking.cpp): one relaxed atomic add per op.
"""
from __future__ import annotations

import functools

import torch

# Explicit neuron kernels (csrc/kernels_matmul.cpp, csrc/kernels_minimal.cpp): always neuron ops.
EXPLICIT_KERNELS = frozenset({
    "aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm",
    "aten::_scaled_dot_product_flash_attention_for_cpu",
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
    "aten::empty", "aten::empty_strided", "aten::as_strided", "aten::view", "aten::_reshape_alias",
    "aten::resize_", "aten::set_", "aten::_copy_from", "aten::_copy_from_and_resize",
    "aten::_local_scalar_dense", "aten::record_stream", "aten::histc",
})


def _split(name: str) -> tuple[str, str, str]:
    qualified, _, overload = name.partition(".")
    namespace, _, base = qualified.partition("::")
    return namespace, base, overload


@functools.lru_cache(maxsize=None)
def is_neuron_op(name: str) -> bool:
    """Whether `name` ("aten::add_.Tensor") is in the neuron op set (see the module docstring)."""
    namespace, base, overload = _split(name)
    if f"{namespace}::{base}" in EXPLICIT_KERNELS:
        return True
    if namespace != "aten":
        return False
    for packet_name in {base, base.rstrip("_")}:
        packet = getattr(torch.ops.aten, packet_name, None)
        if packet is None:
            continue
        candidates = [overload or "default"] if packet_name == base else []
        candidates += list(packet.overloads())  # any variant of the functional op
        for o in candidates:
            op = getattr(packet, o, None)
            if op is not None and torch.Tag.core in op.tags:
                return True
    return False


def get_executed_ops() -> dict[str, int]:
    """Every ATen op executed on neuron since start (or clear_op_tracking()), with its call count."""
    from .. import _C

    counts: dict[str, int] = {}
    for name, count in _C._op_counts():
        counts[name] = counts.get(name, 0) + count
    return dict(sorted(counts.items()))


def get_fallback_ops() -> dict[str, int]:
    """The executed ops outside the neuron op set (they would run on the host CPU on Trainium)."""
    return {name: n for name, n in get_executed_ops().items() if not is_neuron_op(name)}


def clear_op_tracking() -> None:
    """Reset the op counts (the tools' busy time and op totals are not reset)."""
    from .. import _C

    _C._clear_op_tracking()
