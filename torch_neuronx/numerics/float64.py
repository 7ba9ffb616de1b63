"""float64 (docs/hardware-sources.md A1): Trainium has no float64 datapath (NC-v2
native dtypes, high); the XLA path computes F64 as F32 (pytorch/xla
dtype.cpp, high); what the native backend does is unverified. The default
setting TORCH_NEURONX_NUMERICS_FLOAT64=float32 computes float64 ops in
float32 and stores the result in the float64 tensor; `raise` rejects them.
"""
from __future__ import annotations

import torch

from . import recompute, report

DTYPES = (torch.float64, torch.complex128)
_CAST = {torch.float64: torch.float32, torch.complex128: torch.complex64}


class NumericsUnsupportedError(RuntimeError):
    """An op Trainium cannot run under the selected numerics settings."""


def involved(tensors, kwargs) -> bool:
    return any(t.dtype in DTYPES for t in tensors) or kwargs.get("dtype") in DTYPES


def _emulated(func, args, kwargs, out, snapshot):
    a, k = snapshot if snapshot is not None else (args, kwargs)
    out32 = recompute.run_cast(func, a, k, _CAST)
    return recompute.neuron_outputs(func, args, kwargs, out), recompute.flat_tensors(out32)


def emulate(func, args, kwargs, out, snapshot) -> None:
    got, emulated = _emulated(func, args, kwargs, out, snapshot)
    for dst, src in zip(got, emulated):
        dst.copy_(src)


def check(func, args, kwargs, out, snapshot) -> None:
    got, emulated = _emulated(func, args, kwargs, out, snapshot)
    for dst, src in zip(got, emulated):
        if dst.dtype not in DTYPES or dst.numel() == 0:
            continue
        diff = (dst - src.to(dst.dtype)).abs()
        worst = float(diff.max().real) if diff.numel() else 0.0
        if worst != worst or worst > 0:  # NaN counts: the float32 run overflowed
            report.record("float64", func._schema.name, worst, f"max |float64 - float32| of {tuple(dst.shape)}")
            return


def reject(op: str) -> None:
    raise NumericsUnsupportedError(
        f"{op} computes in float64, which Trainium does not support "
        "(TORCH_NEURONX_NUMERICS_FLOAT64=raise). Cast to float32 first, or set "
        "TORCH_NEURONX_NUMERICS_FLOAT64=float32 to emulate float64 as float32.")
