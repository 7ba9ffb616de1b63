"""Composite operations built from engine instructions: softmax, rms_norm, where,
broadcast_to, expand_dims, dropout."""
from __future__ import annotations

import numbers


from ..errors import raise_error
from ..simulator import checks as C
from .._core import dtypes as dt
from . import math as M

__all__ = ["softmax", "rms_norm", "where", "broadcast_to", "expand_dims", "dropout"]


def _flat_free(x):
    return x if x.ndim == 2 else x.reshape((x.shape[0], C.free_size(x)))


def softmax(x, axis=-1, dtype=None, **kw):
    """Softmax over the free axes of ``x`` (all free axes must be reduced).

    Vector max-reduce, Scalar exp(x - max) with an accumulated row sum, Vector
    reciprocal and scale: four instructions.
    """
    from ..isa import scalar_engine, vector_engine
    api = "nl.softmax"
    C.tensor(x, api, "x")
    C.on_chip(x, api, "x")
    axes = vector_engine.reduce_axes(x, axis, api, "x")
    if axes != tuple(range(1, x.ndim)):
        raise_error("err_unsupported_reduce_axis",
                    f"softmax over axis {axis} of {list(x.shape)} must cover all free axes",
                    instruction=api, operand="x")
    xf = _flat_free(x)
    P = x.shape[0]
    mx = M._new_tile((P, 1), dt.float32, api)
    vector_engine.tensor_reduce(mx, M.maximum, xf, axis=1, negate=True, keepdims=True)
    e = M._new_tile(xf.shape, dt.float32, api)
    s = M._new_tile((P, 1), dt.float32, api)
    scalar_engine.activation(e, M.exp, xf, bias=mx, reduce_op=M.add, reduce_res=s)
    r = M._new_tile((P, 1), dt.float32, api)
    vector_engine.reciprocal(r, s)
    out = M._new_tile(x.shape, dtype or (x.dtype if dt.is_float(x.dtype) else dt.float32), api)
    vector_engine.tensor_scalar(_flat_free(out), e, M.multiply, r)
    return out


def rms_norm(x, w, axis=-1, n=None, epsilon=1e-6, dtype=None, **kw):
    """x * rsqrt(sum(x^2, axis) / n + epsilon) * w for a 2-D tile x [P, H].

    ``w`` is an on-chip [1, H] (broadcast over partitions) or [P, H] tile; ``n``
    defaults to H.
    """
    from ..isa import scalar_engine, vector_engine
    api = "nl.rms_norm"
    C.tensor(x, api, "x")
    C.on_chip(x, api, "x")
    C.rank(x, 2, api, "x")
    vector_engine.reduce_axes(x, axis, api, "x")
    P, H = x.shape
    n = H if n is None else n
    sq = M._new_tile((P, H), dt.float32, api)
    ss = M._new_tile((P, 1), dt.float32, api)
    scalar_engine.activation(sq, M.square, x, reduce_op=M.add, reduce_res=ss)
    ms = M._new_tile((P, 1), dt.float32, api)
    vector_engine.tensor_scalar(ms, ss, M.multiply, 1.0 / n, op1=M.add, operand1=float(epsilon))
    r = M._new_tile((P, 1), dt.float32, api)
    scalar_engine.activation(r, M.rsqrt, ms)
    out = M._new_tile((P, H), dtype or x.dtype, api)
    vector_engine.tensor_scalar(out, x, M.multiply, r)
    if w is not None:
        C.tensor(w, api, "w")
        C.on_chip(w, api, "w")
        if w.shape[0] == 1 and P != 1:
            w = w.broadcast_to((P,) + w.shape[1:])
        vector_engine.tensor_tensor(out, out, w, M.multiply)
    return out


def where(condition, x, y, dtype=None, **kw):
    """Element-wise select: x where condition != 0, else y (tiles or scalars)."""
    from ..isa.vector_engine import select
    api = "nl.where"
    C.tensor(condition, api, "condition")
    tiles = [t for t in (x, y) if not isinstance(t, numbers.Number)]
    out_dtype = dtype if dtype is not None else dt.promote(*(t.dtype for t in tiles)) if tiles \
        else dt.float32
    out = M._new_tile(condition.shape, out_dtype, api)
    select(out, condition, x, y, api)
    return out


def broadcast_to(x, shape, **kw):
    """A stride-0 view of ``x`` broadcast to ``shape`` (e.g. [1, N] -> [128, N])."""
    return x.broadcast_to(shape)


def expand_dims(x, axis, **kw):
    """A view of ``x`` with a new size-1 dimension at ``axis``."""
    return x.expand_dim(axis)


def dropout(x, rate, **kw):
    """x * (u >= rate) / (1 - rate) with u ~ U[0, 1) from the simulator's generator."""
    from .creation import rand
    u = rand(x.shape, dt.float32)
    keep = M.greater_equal(u, float(rate))
    return M.multiply(M.multiply(x, keep), float(1.0 / (1.0 - rate)))


