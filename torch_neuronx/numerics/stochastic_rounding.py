"""Stochastic rounding (docs/hardware-sources.md A3, high): with
NEURON_RT_STOCHASTIC_ROUNDING_EN=1 the runtime rounds "all internal rounding
operations when casting from FP32 to a reduced precision data type (FP16,
BF16, FP8, TF32)" stochastically, seeded by NEURON_RT_STOCHASTIC_ROUNDING_SEED
(default 0). Trainium's engines compute in FP32 and cast on output (A4), so
the emulation recomputes an op with low-precision inputs in float32 and rounds
its result to the output dtype: up with probability (x - lo) / (hi - lo),
where lo and hi are the two neighbours of x in the output dtype.
Whether native TorchNeuron eager honours the variable is unverified (A3, low).
"""
from __future__ import annotations

import torch

from . import recompute

DTYPES = (torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2)
_BITS = {torch.float16: torch.int16, torch.bfloat16: torch.int16,
         torch.float8_e4m3fn: torch.uint8, torch.float8_e5m2: torch.uint8}
_CAST = {d: torch.float32 for d in DTYPES}
# Data movement: nothing to round unless a wider float comes in (a cast).
_MOVES = {"aten::copy_", "aten::_to_copy", "aten::clone", "aten::cat", "aten::stack",
          "aten::index", "aten::gather", "aten::index_select", "aten::embedding",
          "aten::constant_pad_nd", "aten::_unsafe_view", "aten::view_copy", "aten::fill_",
          "aten::zero_", "aten::zeros_like", "aten::ones_like", "aten::empty_like", "aten::full",
          "aten::scalar_tensor", "aten::slice_scatter", "aten::select_scatter", "aten::masked_fill"}


class Rounder:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._gen = None

    def _generator(self):
        if self._gen is None:
            self._gen = torch.Generator(device="neuron")
            self._gen.manual_seed(self.seed)
        return self._gen

    def round(self, x: torch.Tensor, dtype) -> torch.Tensor:
        """x (float32, on neuron) rounded stochastically to `dtype`."""
        bits_dtype = _BITS[dtype]
        mag = x.abs()
        nearest = mag.to(dtype)
        near = nearest.to(torch.float32)
        bits = nearest.view(bits_dtype).to(torch.int32)
        lower = torch.where(near > mag, bits - 1, bits)
        upper = torch.where(near < mag, bits + 1, bits)
        lo = lower.to(bits_dtype).view(dtype).to(torch.float32)
        hi = upper.to(bits_dtype).view(dtype).to(torch.float32)
        span = hi - lo
        p = torch.where(span > 0, (mag - lo) / span, torch.zeros_like(mag))
        u = torch.rand(x.shape, device=x.device, generator=self._generator())
        chosen = torch.where(u < p, hi, lo)
        keep_nearest = ~torch.isfinite(hi) | ~torch.isfinite(mag)
        out = torch.where(keep_nearest, near, chosen).copysign(x)
        return out.to(dtype)


_WIDE = (torch.float32, torch.float64)


def applies(func, inputs, outputs) -> bool:
    if not any(t.dtype in DTYPES for t in outputs):
        return False
    if func._schema.name in _MOVES:
        return any(t.dtype in _WIDE for t in inputs)
    return True


def emulate(func, args, kwargs, out, snapshot, rounder: Rounder) -> None:
    a, k = snapshot if snapshot is not None else (args, kwargs)
    out32 = recompute.run_cast(func, a, k, _CAST)
    got = recompute.neuron_outputs(func, args, kwargs, out)
    for dst, src in zip(got, recompute.flat_tensors(out32)):
        if dst.dtype in DTYPES and src.dtype == torch.float32 and src.shape == dst.shape:
            dst.copy_(rounder.round(src, dst.dtype))
