"""Op tracking as TorchNeuron documents it: which ATen ops ran on the device,
how often, and which of them fell back.

What "fallback" means on the virtual NeuronCore: every op runs as a host
kernel here, so fallback is defined by the op, not by where it ran: an op whose
row in TorchNeuron's op-support table (torch_neuronx/ops_support, generated
into docs/op-support.md) is CPU_FALLBACK would run on the host CPU on Trainium.
Op tracking counts op names, not dtypes, so the table's dtype rows (complex,
quantized) do not apply here; the estimate and the strict mode see dtypes.

Counting is in C++ (csrc/op_tracking.cpp): one relaxed atomic add per op.
"""
from __future__ import annotations

from .. import ops_support


def is_neuron_op(name: str) -> bool:
    """Whether op `name` ("aten::add_.Tensor") runs on the Neuron device (status Y in the op-support table)."""
    return ops_support.status(name) == ops_support.Y


def get_executed_ops() -> dict[str, int]:
    """Every ATen op executed on neuron since start (or clear_op_tracking()), with its call count."""
    from .. import _C

    counts: dict[str, int] = {}
    for name, count in _C._op_counts():
        counts[name] = counts.get(name, 0) + count
    return dict(sorted(counts.items()))


def get_fallback_ops() -> dict[str, int]:
    """The executed ops TorchNeuron runs on the host CPU (status CPU_FALLBACK in docs/op-support.md)."""
    return {name: n for name, n in get_executed_ops().items()
            if ops_support.status(name) == ops_support.CPU_FALLBACK}


def clear_op_tracking() -> None:
    """Reset the op counts (the tools' busy time and op totals are not reset)."""
    from .. import _C

    _C._clear_op_tracking()
