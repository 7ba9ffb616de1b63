"""Tensor engine (PE array): nc_matmul with automatic PSUM accumulation, nc_transpose."""
from __future__ import annotations

import numpy as np

from ..errors import raise_error
from .._core import dtypes as dt
from ..simulator import checks as C
from ..simulator import engine_io as io
from ..simulator.context import current
from ..simulator.cost import box_of, matmul_cycles, vector_cycles
from .enums import engine as E
from .enums import matmul_perf_mode

_SBUF_WHY = "the Tensor engine reads its inputs from SBUF only"
_PSUM_WHY = "the Tensor engine writes its output to PSUM only"


def _check_bank(dst, instr, run):
    st = dst._st
    if not st.alloc or st.alloc[0] != "psum":
        return
    r0, r1, c0, c1 = box_of(dst)
    isz = dst.itemsize
    bank = run.target.psum_bank_bytes
    lo, hi = c0 * isz, (c1 + 1) * isz - 1
    if lo // bank != hi // bank:
        raise_error("err_psum_bank_overflow",
                    f"output {list(dst.shape)} {dt.name_of(dst.dtype)} spans bytes {lo}..{hi} of a "
                    f"PSUM partition, crossing a {bank}-byte bank boundary; a matmul accumulation "
                    f"group must stay in one bank (<= 512 fp32 per partition)",
                    instruction=instr, operand="dst")


def _matmul_dtypes(dst, stationary, moving, instr, run, is_transpose):
    for t, n in ((stationary, "stationary"), (moving, "moving")):
        if not dt.is_float(t.dtype):
            raise_error("err_unsupported_dtype",
                        f"operand '{n}' has dtype {dt.name_of(t.dtype)}; the Tensor engine takes "
                        f"fp8_e4m3/fp8_e5m2, bf16, fp16, tf32 or fp32", instruction=instr, operand=n)
    f32 = [dt.is_fp32(t.dtype) for t in (stationary, moving)]
    if any(f32) and not all(f32):
        raise_error("err_unsupported_dtype",
                    f"stationary is {dt.name_of(stationary.dtype)} and moving is "
                    f"{dt.name_of(moving.dtype)}; if one input is fp32/tf32 both must be",
                    instruction=instr, operand="moving")
    ok = {dt.float32} | ({dt.bfloat16} if run.target.matmul_bf16_psum_out else set())
    if is_transpose:
        ok |= {stationary.dtype}
    if dst.dtype not in ok:
        raise_error("err_unsupported_dtype",
                    f"dst dtype {dt.name_of(dst.dtype)}; matmul results in PSUM must be "
                    f"{' or '.join(sorted(dt.name_of(d) for d in ok))} on {run.target.name}",
                    instruction=instr, operand="dst")


def check_mm_sizes(stationary, moving, I):
    M, N = C.free_size(stationary), C.free_size(moving)
    if M > 128:
        raise_error("err_size_of_dimension_exceed_arch_limit",
                    f"stationary free size {M} exceeds gemm_stationary_fmax 128 (stationary must "
                    f"be at most [128, 128], got {list(stationary.shape)})",
                    instruction=I, operand="stationary")
    if N > 512:
        raise_error("err_size_of_dimension_exceed_arch_limit",
                    f"moving free size {N} exceeds gemm_moving_fmax 512 (moving must be at most "
                    f"[128, 512], got {list(moving.shape)})", instruction=I, operand="moving")


def nc_matmul(dst, stationary, moving, is_stationary_onezero=False, is_moving_onezero=False,
              is_transpose=False, accumulate=None, tile_position=(), tile_size=(),
              perf_mode=matmul_perf_mode.none, name=None, **kw):
    """dst[M, N] (PSUM) (+)= stationary[K, M].T @ moving[K, N], contracting over partitions.

    ``accumulate=None``: the first matmul write to a PSUM location overwrites, later
    ones accumulate (tracked per location); True: always accumulate; False: overwrite.
    """
    I = "nisa.nc_matmul"
    run = current(I)
    for t, n in ((dst, "dst"), (stationary, "stationary"), (moving, "moving")):
        C.tensor(t, I, n)
    C.buffer_in(stationary, ("sbuf",), I, "stationary", _SBUF_WHY)
    C.buffer_in(moving, ("sbuf",), I, "moving", _SBUF_WHY)
    C.buffer_in(dst, ("psum",), I, "dst", _PSUM_WHY)
    C.same_partitions(stationary, moving, I, "stationary", "moving")
    K, M, N = stationary.shape[0], C.free_size(stationary), C.free_size(moving)
    check_mm_sizes(stationary, moving, I)
    if dst.shape[0] != M:
        raise_error("err_num_partition_mismatch",
                    f"dst has {dst.shape[0]} partitions but the stationary free size is {M} "
                    f"(dst must be [M, N] = [{M}, {N}])", instruction=I, operand="dst")
    if C.free_size(dst) != N:
        raise_error("err_shape_mismatch",
                    f"dst {list(dst.shape)} does not hold [M, N] = [{M}, {N}]",
                    instruction=I, operand="dst")
    _matmul_dtypes(dst, stationary, moving, I, run, is_transpose)
    double_row = perf_mode == matmul_perf_mode.double_row
    if double_row and not run.target.fp8_double_row:
        raise_error("err_unsupported_arch", f"perf_mode=double_row needs trn2 or newer, target is "
                    f"{run.target.name}", instruction=I, operand="perf_mode")
    _check_bank(dst, I, run)
    io.check_writable(dst, I)
    flags = io.mm_view(dst)
    if accumulate is True and not flags.all():
        raise_error("err_psum_accumulate_uninitialized",
                    f"accumulate=True but {int((~flags).sum())} of {flags.size} dst locations were "
                    f"not written by a previous matmul (memset/tensor_copy or never written)",
                    instruction=I, operand="dst")
    if run.compute:
        a = io.read(stationary).reshape(K, M)
        b = io.read(moving).reshape(K, N)
        with np.errstate(all="ignore"):
            prod = a.T @ b
        if accumulate is False:
            new = prod
        else:
            cur = io.read(dst).reshape(M, N)
            f = flags.reshape(M, N) if flags.flags.c_contiguous else np.array(flags).reshape(M, N)
            new = np.where(f, cur + prod, prod)
        io.write(dst, new.reshape(dst.shape), I, matmul=True)
    else:
        dst._st.written = True
    flags[...] = True
    run.cost.compute("tensor", "nc_matmul", [stationary, moving], [dst],
                     matmul_cycles(stationary, moving, run.target, double_row),
                     flops=2 * K * M * N)


def nc_transpose(dst, data, engine=E.unknown, name=None, **kw):
    """dst[F, P] = data[P, F].T on the Tensor engine (<=128x128, SBUF->PSUM) or the
    Vector engine (<=32x32)."""
    I = "nisa.nc_transpose"
    run = current(I)
    C.tensor(dst, I, "dst")
    C.tensor(data, I, "data")
    C.rank(data, 2, I, "data")
    C.rank(dst, 2, I, "dst")
    if engine == E.unknown:
        engine = E.tensor if dst.buffer.name == "psum" else E.vector
    P, F = data.shape
    if engine == E.tensor:
        C.buffer_in(data, ("sbuf",), I, "data", _SBUF_WHY)
        C.buffer_in(dst, ("psum",), I, "dst", _PSUM_WHY)
        C.max_dim(data, 1, 128, I, "data", "free size (becomes the output partition dim)")
        if dst.dtype not in (dt.float32, data.dtype):
            raise_error("err_unsupported_dtype",
                        f"dst dtype {dt.name_of(dst.dtype)}; a PE transpose writes fp32 or the input "
                        f"dtype {dt.name_of(data.dtype)}", instruction=I, operand="dst")
    elif engine == E.vector:
        C.on_chip(data, I, "data", "Vector")
        C.on_chip(dst, I, "dst", "Vector")
        C.max_dim(data, 0, 32, I, "data", "partition size for a Vector-engine transpose")
        C.max_dim(data, 1, 32, I, "data", "free size for a Vector-engine transpose")
    else:
        raise_error("err_unsupported_op", f"engine {engine.name}; nc_transpose runs on the tensor "
                    f"or vector engine", instruction=I, operand="engine")
    if dst.shape != (F, P):
        raise_error("err_shape_mismatch", f"dst {list(dst.shape)} must be [{F}, {P}] for data "
                    f"{list(data.shape)}", instruction=I, operand="dst")
    io.write(dst, io.read(data).T if run.compute else 0, I)
    if engine == E.tensor:
        cyc = max(P, 64) * (4 if dt.is_fp32(data.dtype) and not dt.is_tf32(data.dtype) else 1)
        run.cost.compute("tensor", "nc_transpose", [data], [dst], float(cyc))
    else:
        run.cost.compute("vector", "nc_transpose", [data], [dst], vector_cycles("one", [data], dst, run.target))
