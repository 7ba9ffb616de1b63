"""Integer all-reduce and reduce-scatter (docs/hardware-sources.md A1, high): no
integer datapath, int32/int64 operands are reduced in FP32 ("lossy for
magnitudes above 2^24").

`prepare()` is the one call the process group makes: `install()` registers it as the
distributed layer's collective-numerics hook (torch_neuronx/distributed/hooks.py) when
numerics start in check or trainium mode; host mode registers nothing, so the transport
tensors stay as they are. trainium: integer sum-reductions run on float32 copies, and
the step after the transfer rounds the float32 result back into the integer tensors. check: the step after the transfer records a result whose
magnitude exceeds 2^24 (the float32 reduction would have rounded it).
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from ..distributed import hooks
from . import config as _config, report
from .int_via_fp32 import EXACT_LIMIT, INT_DTYPES

_SUMS = frozenset((dist.ReduceOp.RedOpType.SUM, dist.ReduceOp.RedOpType.AVG,
                   dist.ReduceOp.RedOpType.PREMUL_SUM))


_mode_of: list = []   # the numerics mode in force (the package's `mode`, given to install())


def _current_mode() -> str:
    try:
        return _mode_of[0]() if _mode_of else "host"
    except _config.NeuronEnvironmentError:
        return "host"


def _is_sum(opts) -> bool:
    op = opts.reduceOp
    return (op.op if isinstance(op, dist.ReduceOp) else op) in _SUMS


def prepare(name: str, opts, outputs: list, inputs: list | None = None):
    """(outputs, inputs, finish) for the transport; finish runs after the transfer.

    `inputs` is None for in-place collectives (all_reduce); for reduce-scatter it is
    the list (or list of lists) the transport reads.
    """
    mode = _current_mode()
    if mode == "host" or not _is_sum(opts) or not any(t.dtype in INT_DTYPES for t in outputs):
        return outputs, inputs, None
    if mode == "check":
        def check() -> None:
            for t in outputs:
                if t.dtype in INT_DTYPES and t.numel():
                    worst = t.to(torch.float64).abs().max().item()
                    if worst > EXACT_LIMIT:
                        report.record("int_via_fp32", name, worst, f"{t.dtype} {tuple(t.shape)}")
        return outputs, inputs, check
    wide = [t.to(torch.float32) if t.dtype in INT_DTYPES else t for t in outputs]
    wide_inputs = _widen(inputs)

    def narrow() -> None:
        for dst, src in zip(outputs, wide):
            if src is not dst:
                info = torch.iinfo(dst.dtype)
                dst.copy_(src.round().clamp(info.min, info.max).to(dst.dtype))
    return wide, wide_inputs, narrow


def _widen(value):
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        return value.to(torch.float32) if value.dtype in INT_DTYPES else value
    return [_widen(v) for v in value]


def install(mode_of) -> None:
    """Make the neuron process group run its sum-reductions through prepare(); `mode_of()` is the
    numerics mode in force, read at each collective (the package holds the settings)."""
    _mode_of[:] = [mode_of]
    hooks.set_collective_numerics(prepare)
