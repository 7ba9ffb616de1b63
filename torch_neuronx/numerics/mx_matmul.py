"""FP8 and MXFP8 matmuls (`torch._scaled_mm`, `torch._scaled_mm_v2`) as Trainium computes them.

TensorE multiplies the fp8 elements, applies the scales (per tensor, per row, or one e8m0 scale
per 32 elements along K for MXFP8, in the same instruction on NeuronCore-v4) and accumulates in
FP32 into PSUM; the result is rounded once to the output dtype when it is written ("MXFP Matrix
Multiplication with NKI", NeuronCore-v4 Architecture; docs/hardware-sources.md A4). The virtual
core's kernel (kernels/scaled_mm.py) computes exactly that with round-to-nearest-even, so with
TORCH_NEURONX_NUMERICS=trainium only the rounding can differ: with NEURON_RT_STOCHASTIC_ROUNDING_EN=1
the FP32 result is rounded stochastically (A3). The generic stochastic-rounding emulation cannot
do this (it re-runs an op on float32 inputs, which these ops refuse), so this one re-runs the op
with a float32 output and rounds that. The order in which TensorE sums one output's K products is
not documented; the float32 matmul's order stands for it.
"""
from __future__ import annotations

import torch

OPS = frozenset({"aten::_scaled_mm", "aten::_scaled_mm_v2"})
ROUNDED = (torch.bfloat16, torch.float16)


def applies(func, outs) -> bool:
    return func._schema.name in OPS and len(outs) == 1 and outs[0].dtype in ROUNDED


def emulate(func, args, kwargs, out, rounder) -> None:
    """Overwrite the op's bf16/fp16 result with its FP32 result rounded by `rounder`."""
    schema = func._schema.arguments
    call = list(args) + [kwargs.get(a.name, a.default_value) for a in schema[len(args):]]
    call[[a.name for a in schema].index("out_dtype")] = torch.float32
    wide = func(*call)
    out.copy_(rounder.round(wide, out.dtype))
