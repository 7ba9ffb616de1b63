"""`torch._grouped_mm` (the MoE expert matmul) on the neuron device.

PyTorch's only non-CUDA kernel for it is a CompositeExplicitAutograd loop of
per-group matmuls that (in torch 2.13) refuses any operand whose last two
strides are both non-unit, and does not look at the offsets' values. Two
consequences, on CPU as much as on neuron:

- `y.sum().backward()` fails with "Invalid strides/sizes, got [0, 0] for
  strides": the incoming gradient is an expanded (all-zero-stride) tensor and
  the backward is itself a `_grouped_mm` of it;
- decreasing offsets, offsets past the grouped dimension or negative ones are
  accepted and index outside the operand (garbage or an out-of-bounds read).

This kernel checks the offsets (a clear error naming `offs`), gives operands
without a unit stride a dense layout (the same values, so results equal CPU's
on a dense gradient), and runs the CPU kernel on the tensors' host aliases.
"""
from __future__ import annotations

import torch

from .. import _C

_alias = _C._cpu_alias


def _dense(t: torch.Tensor) -> torch.Tensor:
    """t, or a contiguous copy where neither of its last two strides is 1 (expanded grads)."""
    s = t.stride()
    return t if 1 in (s[-1], s[-2]) else t.contiguous()


def _grouped_extent(a: torch.Tensor, b: torch.Tensor) -> tuple[int, str]:
    """Size of the dimension the offsets split, and its name (for the error)."""
    if a.dim() == 2 and b.dim() == 2:
        return a.shape[1], "the shared K dimension (self.size(1))"
    if a.dim() == 2:
        return a.shape[0], "the rows of self (self.size(0))"
    return b.shape[-1], "the columns of mat2 (mat2.size(-1))"


def check_offsets(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor | None) -> None:
    """Offsets must be int32, 1-D, non-decreasing and inside the grouped dimension."""
    if offs is None:
        return
    if offs.dtype != torch.int32 or offs.dim() != 1:
        raise RuntimeError(f"torch._grouped_mm: offs must be a 1-D int32 tensor of cumulative group "
                           f"ends, got dtype {offs.dtype} with shape {list(offs.shape)}")
    if offs.numel() == 0:
        return
    extent, name = _grouped_extent(a, b)
    values = _alias(offs) if offs.device.type == "neuron" else offs
    first, last = int(values[0]), int(values[-1])
    if first < 0 or last > extent:
        raise RuntimeError(f"torch._grouped_mm: offs must lie in [0, {extent}] ({name}), got "
                           f"{values.tolist()}; each entry is the end row of one group")
    if offs.numel() > 1 and bool((values[1:] < values[:-1]).any()):
        raise RuntimeError(f"torch._grouped_mm: offs must be non-decreasing (cumulative group ends, "
                           f"e.g. torch.cumsum(tokens_per_expert, 0, dtype=torch.int32)), got "
                           f"{values.tolist()}")


def _check_devices(**tensors) -> None:
    devices = {name: t.device for name, t in tensors.items() if t is not None}
    if len(set(devices.values())) > 1:
        raise RuntimeError(f"torch._grouped_mm: all operands must be on one device, got "
                           f"{', '.join(f'{n} on {d}' for n, d in devices.items())}; move them with .to(self.device)")


def _fp32_accumulation(self, mat2, bias, out_dtype) -> bool:
    """The host GEMM policy (runtime/host_gemm.py) says fp32 for these operands' one dtype."""
    dtype = self.dtype
    if mat2.dtype != dtype or (bias is not None and bias.dtype != dtype) or out_dtype not in (None, dtype):
        return False   # the CPU kernel answers (or raises) as it would on CPU
    bf16, fp16 = _C._low_precision_gemm_fp32()
    return (dtype == torch.bfloat16 and bf16) or (dtype == torch.float16 and fp16)


def grouped_mm(self, mat2, offs=None, bias=None, out_dtype=None):
    _check_devices(self=self, mat2=mat2, offs=offs, bias=bias)
    check_offsets(self, mat2, offs)
    a, b = _dense(self), _dense(mat2)
    host = [None if t is None else _alias(t) for t in (a, b, offs, bias)]
    if _fp32_accumulation(self, mat2, bias, out_dtype):
        # as the matmul kernels (csrc/kernels_matmul.cpp): operands converted once, fp32 GEMMs, one rounding
        up = [None if t is None else t.float() for t in (host[0], host[1], host[3])]
        result = torch._grouped_mm(up[0], up[1], offs=host[2], bias=up[2]).to(self.dtype)
    else:
        result = torch._grouped_mm(*host[:2], offs=host[2], bias=host[3], out_dtype=out_dtype)
    # Allocated outside the dispatcher (as compiled graphs' buffers are): a neuron op inside would
    # make the profiler take this kernel for a composite and give it no estimated device event.
    out = _C._empty_strided_neuron(list(result.shape), list(result.stride()), result.dtype,
                                   self.device.index or 0)
    _alias(out).copy_(result)
    return out


def _no_scaled_kernel(op: str):
    def kernel(*args, **kwargs):
        raise NotImplementedError(
            f"torch.{op} (fp8 grouped matmul) has no neuron kernel: torch "
            f"{torch.__version__.split('+')[0]} ships it for CUDA only, with no CPU kernel for the "
            f"virtual NeuronCore to run. Dequantize and use torch._grouped_mm instead, e.g. "
            f"torch._grouped_mm((a.float() * scale_a[:, None]).bfloat16(), "
            f"(b.float() * scale_b[:, None, :]).bfloat16(), offs=offs)")
    return kernel


def register(lib: torch.library.Library) -> None:
    lib.impl("_grouped_mm", grouped_mm, "PrivateUse1")
    # Where torch has a CPU kernel the boxed CPU fallback runs it; 2.13 has none, so
    # say so on neuron instead of the dispatcher's "from the 'CPU' backend" message.
    for op in ("_scaled_grouped_mm", "_scaled_grouped_mm_v2"):
        if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{op}", "CPU"):
            lib.impl(op, _no_scaled_kernel(op), "PrivateUse1")
