"""Integer ops without an integer datapath (docs/hardware-sources.md A1, high):
matmul, scatter-with-compute (`scatter_add`, `index_add`), all-reduce and
reduce-scatter downcast int32 and int64 operands to FP32, "lossy for
magnitudes above 2^24". Emulation runs the op in float32 and rounds the
result back to the integer dtype; check runs both and reports where they differ.
"""
from __future__ import annotations

import torch

from . import recompute, report

EXACT_LIMIT = 2**24  # the largest magnitude float32 holds every integer up to
INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16,
              torch.uint32, torch.uint64)
_CAST = {d: torch.float32 for d in INT_DTYPES}

OPS = {"mm", "bmm", "addmm", "addbmm", "baddbmm", "dot", "vdot", "mv", "addmv", "matmul",
        "_int_mm", "scatter_add", "scatter_add_", "index_add", "index_add_", "scatter_reduce",
        "scatter_reduce_", "index_reduce", "index_reduce_"}


def applies(func, tensors) -> bool:
    if func._schema.name.split("::")[-1] not in OPS:
        return False
    if func._schema.name.startswith(("aten::scatter_reduce", "aten::index_reduce")):
        return False  # only the sum reductions are listed in the facts; see _reduce_is_sum
    return any(t.dtype in INT_DTYPES for t in tensors)


def applies_reduce(func, args, kwargs, tensors) -> bool:
    name = func._schema.name
    if name not in ("aten::scatter_reduce", "aten::scatter_reduce_", "aten::index_reduce",
                    "aten::index_reduce_"):
        return False
    reduce = kwargs.get("reduce", args[4] if len(args) > 4 else None)
    return reduce == "sum" and any(t.dtype in INT_DTYPES for t in tensors)


def _to_int(src: torch.Tensor, dtype) -> torch.Tensor:
    info = torch.iinfo(dtype)
    return src.clamp(info.min, info.max).to(dtype) if src.is_floating_point() else src.to(dtype)


def _outputs_and_fp32_runs(func, args, kwargs, out, snapshot):
    """(output on neuron, the same output computed with integer operands cast to float32) pairs."""
    a, k = snapshot if snapshot is not None else (args, kwargs)
    out32 = recompute.run_cast(func, a, k, _CAST)
    got = recompute.neuron_outputs(func, args, kwargs, out)
    emulated = recompute.neuron_outputs(func, a, k, out32) if snapshot is not None else \
        recompute.flat_tensors(out32)
    return zip(got, emulated)


def emulate(func, args, kwargs, out, snapshot) -> None:
    for dst, src in _outputs_and_fp32_runs(func, args, kwargs, out, snapshot):
        dst.copy_(_to_int(src, dst.dtype))


def check(func, args, kwargs, out, snapshot) -> None:
    for dst, src in _outputs_and_fp32_runs(func, args, kwargs, out, snapshot):
        if src.dtype == torch.float32 and dst.dtype in INT_DTYPES:
            differs = _to_int(src, dst.dtype) != dst
            if bool(differs.any()):
                worst = dst[differs].to(torch.float64).abs().max().item()
                report.record("int_via_fp32", func._schema.name, worst, f"{dst.dtype} {tuple(dst.shape)}")
                return
