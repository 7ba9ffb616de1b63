"""`torch._scaled_mm` and `torch._scaled_mm_v2` on the neuron device, MXFP8 included.

FP8 with float32 scales (per tensor, per row) runs the CPU kernel on the tensors' host aliases,
as every neuron op does. MXFP8 is the OCP Microscaling format: float8_e4m3fn or float8_e5m2
elements, one float8_e8m0fnu scale (a power of two) per 32 consecutive elements along K. PyTorch
2.13's CPU kernel has no MX path, so this file computes it: each operand dequantised exactly into
float32 (an fp8 value times a power of two), one float32 matmul, the bias added in float32, one
rounding to `out_dtype`. That is how NeuronCore-v4's TensorE runs an MX matmul (dequantisation
and matmul in one instruction, FP32 accumulation, FP32 or BF16 out: Neuron docs, "MXFP Matrix
Multiplication with NKI" and "NeuronCore-v4 Architecture").

The scale layouts are PyTorch's: `torch._scaled_mm` with e8m0 scales takes them in the swizzled
("blocked", SWIZZLE_32_4_4) layout that torchao's MX recipe passes on CUDA (a flat tensor), and
here also as plain 2-D [M, K/32] / [N, K/32] tensors (Inductor lowers `_scaled_mm_v2` to
`_scaled_mm` with the scales as given); `_scaled_mm_v2` (`torch.nn.functional.scaled_mm`) takes
ScalingType.BlockWise1x32 with NO_SWIZZLE ([M, K/32] and [N, K/32]) or SWIZZLE_32_4_4. Only chips whose TensorE has an MXFP8 rate in `neuron_hardware`
(trn3) run it: on another configured target the op raises, naming the target and the variable.
"""
from __future__ import annotations

import torch

from .. import _C, runtime

_alias = _C._cpu_alias

BLOCK = 32                                   # OCP MX block size along K
ELEMENTS = (torch.float8_e4m3fn, torch.float8_e5m2)   # OCP MXFP8 element types
OUT_DTYPES = (torch.float32, torch.bfloat16)  # TensorE writes FP32 or BF16 (NeuronCore-v4 docs)
MXFP8_RATE = "mxfp8"                          # the TensorE rate name in neuron_hardware's chips
_BLOCKWISE_1X32 = 3                           # torch.nn.functional.ScalingType.BlockWise1x32
_NO_SWIZZLE, _SWIZZLE_32_4_4 = 0, 1           # torch.nn.functional.SwizzleType


class MXFormatError(ValueError):
    """A bad argument of an MXFP8 matmul; the message names it and says what to pass."""


class MXUnsupportedError(RuntimeError):
    """The configured Trainium target has no MXFP8 on its TensorE."""


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def blocked_numel(rows: int, k: int) -> int:
    """Elements of a swizzled (SWIZZLE_32_4_4) scale tensor: rows padded to 128, K/32 padded to 4."""
    return _ceil(rows, 128) * 128 * _ceil(k // BLOCK, 4) * 4


def unswizzle(scale: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """[rows, cols] scales from the SWIZZLE_32_4_4 layout: tiles of 128 rows x 4 columns, each
    stored as 32 groups of (4 row-quarters x 4 columns) (cuBLAS' block-scaling layout, which
    torchao's `to_blocked` writes)."""
    rb, cb = _ceil(rows, 128), _ceil(cols, 4)
    tiles = scale.reshape(rb * cb, 32, 4, 4).transpose(1, 2)           # (tile, quarter, row, col)
    grid = tiles.reshape(rb, cb, 128, 4).permute(0, 2, 1, 3).reshape(rb * 128, cb * 4)
    return grid[:rows, :cols]


def target_supports_mxfp8() -> tuple[bool, str]:
    """Whether the configured target's TensorE runs MXFP8, and the target's name."""
    topo = runtime.topology()
    return MXFP8_RATE in topo.chip.tensor_flops, f"{topo.instance.name} ({topo.chip.name})"


def require_mxfp8_target(op: str) -> None:
    ok, target = target_supports_mxfp8()
    if not ok:
        raise MXUnsupportedError(
            f"{op}: MXFP8 (float8_e8m0fnu block scales) needs a TensorE with MX support, which "
            f"{target} lacks (the virtual device follows TORCH_NEURONX_INSTANCE_TYPE); MXFP8 runs on "
            f"trn3 (NeuronCore-v4). Set TORCH_NEURONX_INSTANCE_TYPE=trn3.3xlarge, or quantise with "
            f"float32 per-tensor or per-row scales, which this target runs as FP8.")


def is_mx(scale_a: torch.Tensor, scale_b: torch.Tensor) -> bool:
    return torch.float8_e8m0fnu in (scale_a.dtype, scale_b.dtype)


def check_operands(op: str, a: torch.Tensor, b: torch.Tensor, scale_a, scale_b, out_dtype) -> None:
    """The arguments of an MXFP8 matmul, each error naming the argument and the fix."""
    if a.dim() != 2 or b.dim() != 2:
        raise MXFormatError(f"{op}: self and mat2 must be 2-D ([M, K] and [K, N]), got shapes "
                            f"{list(a.shape)} and {list(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise MXFormatError(f"{op}: self is [M, K] = {list(a.shape)} but mat2 is {list(b.shape)}; "
                            f"mat2 must be [K, N] with K = {a.shape[1]}")
    for name, t in (("self", a), ("mat2", b)):
        if t.dtype not in ELEMENTS:
            raise MXFormatError(f"{op}: {name} has dtype {t.dtype}; MXFP8 elements are OCP "
                                f"torch.float8_e4m3fn or torch.float8_e5m2")
    k = a.shape[1]
    if k % BLOCK:
        raise MXFormatError(f"{op}: K (self.size(1) = {k}) must be a multiple of {BLOCK}, the MX block "
                            f"size; pad both operands with zeros along K to {_ceil(k, BLOCK) * BLOCK}")
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if s.dtype != torch.float8_e8m0fnu:
            raise MXFormatError(f"{op}: {name} has dtype {s.dtype}; MXFP8 scales are "
                                f"torch.float8_e8m0fnu (both scales), one per {BLOCK} elements along K")
    if out_dtype not in OUT_DTYPES:
        raise MXFormatError(f"{op}: out_dtype={out_dtype} is not an MX matmul output; pass "
                            f"out_dtype=torch.bfloat16 or torch.float32 (TensorE writes FP32 or BF16)")


def _plain_shape(scale: torch.Tensor, rows: int, k: int) -> bool:
    return scale.dim() == 2 and tuple(scale.shape) == (rows, k // BLOCK)


def _scales(op: str, name: str, scale: torch.Tensor, rows: int, k: int, swizzled: bool | None,
            rows_name: str) -> torch.Tensor:
    """The [rows, K/32] float32 scales of one operand, from its given layout (None: `torch._scaled_mm`'s
    rule, a 2-D [rows, K/32] tensor is the plain layout and any other the swizzled one)."""
    host = _alias(scale) if scale.device.type == "neuron" else scale
    blocks = k // BLOCK
    if swizzled is None:
        swizzled = not _plain_shape(host, rows, k)
    if swizzled:
        want = blocked_numel(rows, k)
        if host.numel() != want:
            raise MXFormatError(
                f"{op}: {name} has {host.numel()} elements; the swizzled (SWIZZLE_32_4_4) layout of "
                f"{rows_name} = {rows} rows x K/32 = {blocks} blocks has {want} (rows padded to 128, "
                f"blocks to 4), as torchao's to_blocked writes it")
        grid = unswizzle(host.contiguous(), rows, blocks)
    else:
        if tuple(host.shape) != (rows, blocks):
            raise MXFormatError(f"{op}: {name} has shape {list(host.shape)}; with NO_SWIZZLE it must be "
                                f"[{rows_name}, K/32] = [{rows}, {blocks}]")
        grid = host
    return grid.to(torch.float32)


def dequantise(data: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """[rows, K] float32 from [rows, K] fp8 elements and [rows, K/32] float32 scales (exact)."""
    return data.to(torch.float32) * scales.repeat_interleave(BLOCK, dim=1)


def block_scales(op: str, self, mat2, scale_a, scale_b, swizzled: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The [M, K/32] and [N, K/32] float32 scales (on the host) of an MXFP8 matmul's operands."""
    k = self.shape[1]
    return (_scales(op, "scale_a", scale_a, self.shape[0], k, swizzled, "M"),
            _scales(op, "scale_b", scale_b, mat2.shape[1], k, swizzled, "N"))


def mx_matmul_fp32(self, mat2, sa, sb, bias=None) -> torch.Tensor:
    """The float32 result (on the host) of an MXFP8 matmul of neuron tensors, bias added."""
    out = dequantise(_alias(self), sa) @ dequantise(_alias(mat2).t(), sb).t()
    if bias is not None:
        out = out + _host(bias).to(torch.float32)
    return out


def _to_neuron(result: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    # Allocated outside the dispatcher (as compiled graphs' buffers are): a neuron op inside would
    # make the profiler take this kernel for a composite and give it no estimated device event.
    out = _C._empty_strided_neuron(list(result.shape), list(result.stride()), result.dtype,
                                   like.device.index or 0)
    _alias(out).copy_(result)
    return out


def _check_devices(op: str, **tensors) -> None:
    where = {n: t.device for n, t in tensors.items() if isinstance(t, torch.Tensor)}
    if len(set(where.values())) > 1:
        raise RuntimeError(f"{op}: all tensors must be on one device, got "
                           f"{', '.join(f'{n} on {d}' for n, d in where.items())}; move them with .to(self.device)")


def _mx(op, self, mat2, scale_a, scale_b, bias, out_dtype, swizzled):
    check_operands(op, self, mat2, scale_a, scale_b, out_dtype)
    sa, sb = block_scales(op, self, mat2, scale_a, scale_b, swizzled)   # bad layouts first, then the target
    require_mxfp8_target(op)
    return _to_neuron(mx_matmul_fp32(self, mat2, sa, sb, bias).to(out_dtype), self)


def _host(t):
    return _alias(t) if isinstance(t, torch.Tensor) and t.device.type == "neuron" else t


def scaled_mm(self, mat2, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None,
              use_fast_accum=False):
    op = "torch._scaled_mm"
    _check_devices(op, self=self, mat2=mat2, scale_a=scale_a, scale_b=scale_b, bias=bias)
    if is_mx(scale_a, scale_b):
        if scale_result is not None:
            raise MXFormatError(f"{op}: scale_result is not used by MXFP8 (the output is bf16 or fp32); "
                                f"pass scale_result=None")
        return _mx(op, self, mat2, scale_a, scale_b, bias, out_dtype or torch.bfloat16, swizzled=None)
    result = torch._scaled_mm(*(_host(t) for t in (self, mat2, scale_a, scale_b, bias, scale_result)),
                              out_dtype=out_dtype, use_fast_accum=use_fast_accum)
    return _to_neuron(result, self)


def scaled_mm_out(self, mat2, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None,
                  use_fast_accum=False, *, out):
    """`out=` form (what Inductor's compiled programs call, `torch._scaled_mm_v2` lowered to it)."""
    result = scaled_mm(self, mat2, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum)
    if out.shape != result.shape:
        out.resize_(result.shape)
    _alias(out).copy_(_alias(result))
    return out


def scaled_mm_v2(self, mat2, scale_a, recipe_a, swizzle_a, scale_b, recipe_b, swizzle_b, bias,
                 out_dtype, contraction_dim=(), use_fast_accum=False):
    op = "torch._scaled_mm_v2"
    _check_devices(op, self=self, mat2=mat2, bias=bias, **{f"scale_a[{i}]": s for i, s in enumerate(scale_a)},
                   **{f"scale_b[{i}]": s for i, s in enumerate(scale_b)})
    if list(recipe_a) == [_BLOCKWISE_1X32] or list(recipe_b) == [_BLOCKWISE_1X32]:
        if list(recipe_a) != list(recipe_b) or len(scale_a) != 1 or len(scale_b) != 1:
            raise MXFormatError(f"{op}: MXFP8 takes one scale tensor per operand with "
                                f"ScalingType.BlockWise1x32 for both; got scale_recipe_a={list(recipe_a)}, "
                                f"scale_recipe_b={list(recipe_b)}")
        if contraction_dim and list(contraction_dim) != [1, 0]:
            raise MXFormatError(f"{op}: contraction_dim={list(contraction_dim)}; MXFP8 contracts self's "
                                f"dim 1 with mat2's dim 0 (pass () or [1, 0])")
        swizzles = {tuple(swizzle_a) or (_NO_SWIZZLE,), tuple(swizzle_b) or (_NO_SWIZZLE,)}
        if len(swizzles) != 1 or swizzles.pop()[0] not in (_NO_SWIZZLE, _SWIZZLE_32_4_4):
            raise MXFormatError(f"{op}: swizzle_a={list(swizzle_a)} and swizzle_b={list(swizzle_b)} must be "
                                f"the same, SwizzleType.NO_SWIZZLE or SwizzleType.SWIZZLE_32_4_4")
        swizzled = (tuple(swizzle_a) or (_NO_SWIZZLE,))[0] == _SWIZZLE_32_4_4
        return _mx(op, self, mat2, scale_a[0], scale_b[0], bias, out_dtype or torch.bfloat16, swizzled)
    result = torch._scaled_mm_v2(_host(self), _host(mat2), [_host(s) for s in scale_a], recipe_a, swizzle_a,
                                 [_host(s) for s in scale_b], recipe_b, swizzle_b, _host(bias), out_dtype,
                                 contraction_dim, use_fast_accum)
    return _to_neuron(result, self)


# Output shapes for a dry run (plan): PyTorch's meta kernels check CUDA's layout contract (MX scales
# swizzled only), which these kernels widen; the result is [M, N] in out_dtype either way.
# An MXFP8 call is checked as the kernel checks it (arguments, then the target), so a plan for a
# target without MXFP8 stops where the run would.
def scaled_mm_shapes(self, mat2, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None,
                     use_fast_accum=False):
    mx = is_mx(scale_a, scale_b)
    if mx:
        _check_mx_call("torch._scaled_mm", self, mat2, scale_a, scale_b, out_dtype or torch.bfloat16, None)
    return self.new_empty((self.shape[0], mat2.shape[1]), dtype=out_dtype or (torch.bfloat16 if mx else self.dtype))


def scaled_mm_v2_shapes(self, mat2, scale_a, recipe_a, swizzle_a, scale_b, recipe_b, swizzle_b, bias,
                        out_dtype, contraction_dim=(), use_fast_accum=False):
    mx = _BLOCKWISE_1X32 in list(recipe_a) + list(recipe_b)
    if mx:
        swizzled = (tuple(swizzle_a) or (_NO_SWIZZLE,))[0] == _SWIZZLE_32_4_4
        _check_mx_call("torch._scaled_mm_v2", self, mat2, scale_a[0], scale_b[0], out_dtype or torch.bfloat16,
                       swizzled)
    return self.new_empty((self.shape[0], mat2.shape[1]), dtype=out_dtype or (torch.bfloat16 if mx else self.dtype))


def _check_mx_call(op, self, mat2, scale_a, scale_b, out_dtype, swizzled) -> None:
    check_operands(op, self, mat2, scale_a, scale_b, out_dtype)
    k = self.shape[1]
    for name, scale, rows, rows_name in (("scale_a", scale_a, self.shape[0], "M"), ("scale_b", scale_b, mat2.shape[1], "N")):
        swz = not _plain_shape(scale, rows, k) if swizzled is None else swizzled
        want = blocked_numel(rows, k) if swz else rows * (k // BLOCK)
        if scale.numel() != want:
            raise MXFormatError(f"{op}: {name} has {scale.numel()} elements; {rows_name} = {rows} rows x "
                                f"K/32 = {k // BLOCK} blocks in the {'swizzled' if swz else 'NO_SWIZZLE'} "
                                f"layout has {want}")
    require_mxfp8_target(op)


SHAPES = {"aten::_scaled_mm": scaled_mm_shapes, "aten::_scaled_mm_v2": scaled_mm_v2_shapes}


def register(lib: torch.library.Library) -> None:
    lib.impl("_scaled_mm", scaled_mm, "PrivateUse1")
    lib.impl("_scaled_mm.out", scaled_mm_out, "PrivateUse1")
    lib.impl("_scaled_mm_v2", scaled_mm_v2, "PrivateUse1")
