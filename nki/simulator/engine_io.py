"""Reading operands as fp32 for engine maths, and writing results with the dst cast."""
from __future__ import annotations

import numpy as np

from .._core import dtypes as dt
from .._core.tensor import np_view
from ..errors import raise_error

_as_strided = np.lib.stride_tricks.as_strided


def read(t) -> np.ndarray:
    """Operand values as float32 (engines compute in fp32)."""
    return np_view(t).astype(np.float32)


def read_exact(t) -> np.ndarray:
    """Operand values without conversion (int32 GpSimd maths)."""
    v = np_view(t)
    return v.astype(np.float32) if dt.is_float(t.dtype) else v.astype(np.int64)


def cast_to(values, dtype) -> np.ndarray:
    """Convert fp32 engine results to storage values of NKI dtype ``dtype``."""
    v = np.asarray(values)
    if dt.is_tf32(dtype):
        return dt.round_tf32(v.astype(np.float32))
    if dt.is_float(dtype):
        return v.astype(np.float32).astype(np.dtype(dtype))
    if np.dtype(dtype) == dt.bool_:
        return v != 0
    info = np.iinfo(dtype)
    if v.dtype.kind == "f":
        v = np.nan_to_num(np.rint(v), nan=0.0)
        v = np.clip(v, info.min, info.max)
    return v.astype(np.dtype(dtype))


def check_writable(dst, instr: str, operand: str = "dst") -> None:
    st = dst._st
    if st.is_input and not st.mutable:
        raise_error("err_cannot_update_immutable_parameter",
                    f"{operand} writes kernel parameter '{st.param_name}', which is immutable",
                    instruction=instr, operand=operand)
    if 0 in dst.strides and dst.size > 1 and any(
            s == 0 and n > 1 for s, n in zip(dst.strides, dst.shape)):
        raise_error("err_invalid_view", f"{operand} is a broadcast view (stride 0); "
                    "an instruction cannot write through it", instruction=instr, operand=operand)


def write(dst, values, instr: str, *, matmul: bool = False) -> None:
    """Store ``values`` (broadcast to dst.shape) into ``dst`` with hardware rounding."""
    from .context import current
    run = current(instr)
    check_writable(dst, instr)
    st = dst._st
    st.written = True
    if not run.compute:
        return
    view = np_view(dst)
    v = np.broadcast_to(np.asarray(values), dst.shape) if np.ndim(values) else values
    if st.np_dtype != st.dtype and not dt.is_tf32(dst.dtype):   # NKI_PRECISE_FP=0
        view[...] = np.asarray(v, dtype=np.float32) if dt.is_float(dst.dtype) else cast_to(v, dst.dtype)
    else:
        view[...] = cast_to(v, dst.dtype)
    if st.mm_init is not None and not matmul:
        mm_view(dst)[...] = False


def mm_view(t) -> np.ndarray:
    """PSUM 'written by a matmul' flags for the locations of ``t``."""
    st = t._st
    if st.mm_init is None:
        st.mm_init = np.zeros(st.size, dtype=np.bool_)
    return _as_strided(st.mm_init[t.offset:], shape=t.shape, strides=list(t.strides))
