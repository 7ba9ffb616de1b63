"""64-bit integers (docs/hardware-sources.md A1, high): neuronx-cc's default
`--native-int64=default` downcasts int64 to int32, "which may lose precision
for values outside the signed 32-bit range". How it downcasts is not
documented (unverified): we assume two's-complement wrap-around, the
TORCH_NEURONX_NUMERICS_INT64=wrap setting; `native` is trn2 with
`--native-int64=enabled` (no difference from the host).

Emulation keeps every int64/uint64 neuron tensor inside the 32-bit range by
wrapping each op's results: on values already in range, the exact 64-bit
result wrapped to 32 bits equals the 32-bit computation for the ring
operations (add, sub, mul, neg, sum, cumsum) and for the others (division,
comparisons, min/max), whose exact results on 32-bit inputs fit 32 bits.
"""
from __future__ import annotations

import torch

from . import report

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
UINT32_MAX = 2**32 - 1
DTYPES = (torch.int64, torch.uint64)


def _bounds(dtype):
    return (0, UINT32_MAX) if dtype == torch.uint64 else (INT32_MIN, INT32_MAX)


def out_of_range(t: torch.Tensor):
    """The value farthest outside the 32-bit range, or None."""
    if t.numel() == 0:
        return None
    lo, hi = _bounds(t.dtype)
    tmin, tmax = (int(v) for v in torch.aminmax(t if t.dtype == torch.int64 else t.to(torch.float64)))
    worst = None
    if tmin < lo:
        worst = tmin
    if tmax > hi and (worst is None or tmax - hi > lo - worst):
        worst = tmax
    return worst


def check(op: str, tensors) -> None:
    for t in tensors:
        if t.dtype in DTYPES:
            worst = out_of_range(t)
            if worst is not None:
                report.record("int64", op, float(worst), f"{t.dtype} {tuple(t.shape)}")
                return


def wrap_(t: torch.Tensor) -> None:
    """Replace t's values by their 32-bit wrap-around, in place."""
    if t.numel() == 0 or out_of_range(t) is None:
        return
    if t.dtype == torch.int64:
        t.copy_(t.to(torch.int32))  # the CPU conversion keeps the low 32 bits
    else:
        t.copy_(torch.remainder(t.to(torch.float64), 2.0**32).to(torch.uint64))  # uint64: modulo 2^32


def _big_int(v) -> bool:
    return type(v) is int and not INT32_MIN <= v <= INT32_MAX


def big_scalar(args, kwargs):
    """The first Python int argument outside the 32-bit range (e.g. `t + 2**40`), or None:
    Trainium downcasts it with the op's int64 operands."""
    for v in (*args, *kwargs.values()):
        if _big_int(v):
            return v
    return None


def wrap_scalars(args, kwargs):
    """(args, kwargs) with Python ints outside the 32-bit range wrapped as int32 wraps them."""
    def wrap(v):
        return ((v + 2**31) % 2**32) - 2**31 if _big_int(v) else v
    return tuple(wrap(a) for a in args), {k: wrap(v) for k, v in kwargs.items()}
