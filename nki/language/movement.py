"""Data movement: load (HBM->SBUF), store (SBUF->HBM), copy, load_transpose2d, assignment."""
from __future__ import annotations

import numbers

from ..errors import raise_error
from ..simulator import checks as C
from .._core import buffers as B
from .._core import dtypes as dt
from .._core.ops import register_language

__all__ = ["load", "store", "copy", "load_transpose2d"]


def _new(shape, dtype, buffer, api):
    from .creation import allocate
    return allocate(shape, dtype, buffer, "", api=api)


def load(src, dtype=None, **kw):
    """Read an HBM tensor (<= 128 partitions) into a new SBUF tile; casts to ``dtype``."""
    from ..isa.dma import _dma
    api = "nl.load"
    C.tensor(src, api, "src")
    C.buffer_in(src, ("hbm",), api, "src", "nl.load reads HBM; on-chip tiles are already loaded")
    if src.ndim == 1:
        src = src.reshape((1, src.shape[0]))
    C.pmax(src, api, "src")
    tile = _new(src.shape, dt.canonical(dtype) if dtype is not None else src.dtype, B.sbuf, api)
    _dma(tile, src, api, "dst", "src")
    return tile


def store(dst, value, **kw):
    """Write an SBUF tile (or broadcastable tile) to the HBM tensor ``dst``."""
    from ..isa.dma import _dma
    api = "nl.store"
    C.tensor(dst, api, "dst")
    C.buffer_in(dst, ("hbm",), api, "dst", "nl.store writes HBM; use nisa.tensor_copy on chip")
    if isinstance(value, numbers.Number):
        raise TypeError("nl.store: value must be a tile; create one with nl.full first")
    C.tensor(value, api, "value")
    if value.buffer.name == "psum":
        raise_error("err_unsupported_memory",
                    "Expected operand 'value' of 'nl.store' to be in address space 'sbuf', but got "
                    "a tile in 'psum'", instruction=api, operand="value",
                    hint="evict PSUM to SBUF first: tile = nl.copy(psum_tile) or nisa.tensor_copy")
    if dst.ndim == 1 and value.ndim == 2 and value.shape[0] == 1:
        dst = dst.reshape((1, dst.shape[0]))
    _dma(dst, value, api, "dst", "value")


def copy(x, dtype=None, **kw):
    """A new SBUF tile holding a copy of on-chip ``x`` (Vector tensor_copy), cast to ``dtype``."""
    from ..isa.vector_engine import tensor_copy
    api = "nl.copy"
    C.tensor(x, api, "x")
    if x.buffer.hbm:
        return load(x, dtype=dtype)
    out = _new(x.shape, dt.canonical(dtype) if dtype is not None else x.dtype, B.sbuf, api)
    tensor_copy(out, x)
    return out


def load_transpose2d(src, dtype=None, **kw):
    """Read 2-D HBM ``src`` [K, M] transposed into a new SBUF tile [M, K] (DMA transpose)."""
    from ..isa.dma import _dma
    api = "nl.load_transpose2d"
    C.tensor(src, api, "src")
    C.buffer_in(src, ("hbm",), api, "src")
    C.rank(src, 2, api, "src")
    t = src.permute(1, 0)
    C.pmax(t, api, "src (transposed)")
    tile = _new(t.shape, dt.canonical(dtype) if dtype is not None else src.dtype, B.sbuf, api)
    _dma(tile, t, api, "dst", "src")
    return tile


def assign(dst, value) -> None:
    """``t[idx] = value``: a DMA when HBM is involved, else a tensor_copy / memset."""
    from ..isa.dma import _dma
    from ..isa.vector_engine import memset, tensor_copy
    from .._core.tensor import NkiTensor
    api = "tensor.__setitem__"
    if isinstance(value, numbers.Number):
        if dst.buffer.hbm:
            raise TypeError("assigning a number to an HBM tensor: build a tile with nl.full and store it")
        memset(dst, float(value) if dt.is_float(dst.dtype) else int(value))
        return
    if not isinstance(value, NkiTensor):
        raise TypeError(f"cannot assign {type(value).__name__} to an NKI tensor")
    if dst.same_view(value):
        return
    if dst.buffer.hbm or value.buffer.hbm:
        _dma(dst, value, api, "dst", "value")
        return
    if dst.size < value.size:
        raise_error("err_store_dst_shape_smaller_than_other_shape",
                    f"destination {list(dst.shape)} is smaller than source {list(value.shape)}",
                    instruction=api, operand="dst")
    if value.shape != dst.shape and value.size != dst.size:
        value = value.broadcast_to(dst.shape)
    tensor_copy(dst, value)


register_language(assign=assign)   # what ``t[idx] = value`` does (see nki._core.ops)
