"""Reduction operators gloo lacks, done as SUM plus an in-place step afterwards.

- AVG: SUM, then divide by the group size (floor division for integer types).
- PREMUL_SUM(f): SUM, then scale by f (NCCL scales each input first; scaling the
  sum instead differs only by rounding).
Other ops (SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR) go to gloo unchanged.
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.distributed as dist

_RedOpType = dist.ReduceOp.RedOpType
_SUM = dist.ReduceOp.SUM
_BITWISE = frozenset((_RedOpType.BAND, _RedOpType.BOR, _RedOpType.BXOR))
_NATIVE = frozenset((_RedOpType.SUM, _RedOpType.PRODUCT, _RedOpType.MIN, _RedOpType.MAX))


def _op_type(op) -> _RedOpType:
    return op.op if isinstance(op, dist.ReduceOp) else op


def adapt(opts, size: int, outputs: list[torch.Tensor]) -> Callable[[], None] | None:
    """Rewrite `opts.reduceOp` into one gloo supports; return the step that
    completes `outputs` (host views) after the transfer, or None."""
    op = opts.reduceOp
    kind = _op_type(op)
    if kind in _NATIVE:
        return None
    if kind in _BITWISE:
        for t in outputs:
            if t.is_floating_point() or t.is_complex():
                raise ValueError(
                    f"ReduceOp.{kind.name} needs integer or bool tensors, got {t.dtype}"
                )
        return None
    if kind == _RedOpType.AVG:
        for t in outputs:
            if t.dtype == torch.bool:
                raise ValueError("ReduceOp.AVG is not defined for bool tensors")
        opts.reduceOp = _SUM
        if size == 1:
            return None

        def average() -> None:
            for t in outputs:
                if t.is_floating_point() or t.is_complex():
                    t.div_(size)
                else:
                    t.floor_divide_(size)

        return average
    if kind == _RedOpType.PREMUL_SUM:
        factor = op.factor if isinstance(op, dist.ReduceOp) else None
        if factor is None:
            raise ValueError("ReduceOp.PREMUL_SUM needs a factor: use dist._make_nccl_premul_sum(f)")
        opts.reduceOp = _SUM

        def scale() -> None:
            for t in outputs:
                t.mul_(factor.to(t.device) if isinstance(factor, torch.Tensor) else factor)

        return scale
    return None
