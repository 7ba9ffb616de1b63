"""Element-wise operators. Each ``nl.<op>`` is an :class:`Op` (defined in nki._core.ops):
callable as a high-level function that returns a new SBUF tile, and usable as the ``op=`` of
nki.isa instructions.

Unary activation functions run on the Scalar engine (nisa.activation); binary
operators on the Vector engine (tensor_tensor, or tensor_scalar when one operand is
a scalar or a (P, 1) vector); int32 and nl.power / nl.rsqrt on GpSimd.
"""
from __future__ import annotations

import numbers

import numpy as np

from .._core import buffers as B
from .._core import dtypes as dt
from .._core.ops import Op, as_op, register_language  # noqa: F401  (re-exports)
from .._core.ops import (  # noqa: F401  (re-exports: nl.add, nl.exp, ...)
    add, subtract, multiply, divide, maximum, minimum, abs_max, abs_min, power, fmod, mod,
    equal, not_equal, less, less_equal, greater, greater_equal, logical_and, logical_or,
    logical_xor, bitwise_and, bitwise_or, bitwise_xor, left_shift, right_shift, exp, log, sqrt,
    rsqrt, reciprocal, tanh, sigmoid, relu, gelu, gelu_apprx_tanh, gelu_apprx_sigmoid, gelu_dx,
    silu, silu_dx, softplus, mish, erf, erf_dx, sin, cos, tan, arctan, square, abs, sign,
    negative, identity, ceil, floor, trunc, logical_not, invert, bitwise_not, copy)
from .._core.tensor import NkiTensor
from ..errors import raise_error
from ..isa import scalar_engine, vector_engine
from ..isa.enums import engine as E
from ..simulator import checks as C
from .creation import allocate
from .movement import copy as copy_tile


def _new_tile(shape, dtype, api):
    return allocate(shape, dtype, B.sbuf, "", api=api)


def _unary(op, x, dtype, out):
    api = f"nl.{op.name}"
    if isinstance(x, numbers.Number):
        return float(op.fn(np.float32(x)))
    C.tensor(x, api, "x")
    C.on_chip(x, api, "x")
    if out is None:
        rd = dtype if dtype is not None else (x.dtype if dt.is_float(x.dtype) or op.int_ok
                                              else dt.float32)
        out = _new_tile(x.shape, rd, api)
    if op.vector_unary or not op.act:
        if op.name == "reciprocal":
            vector_engine.reciprocal(out, x)
        else:
            vector_engine.tensor_unary(out, op, x, E.gpsimd if op.gpsimd else E.unknown, api)
    else:
        scalar_engine.activation(out, op, x)
    return out


def _binary(op, x, y, dtype, out):
    api = f"nl.{op.name}"
    xs, ys = isinstance(x, numbers.Number), isinstance(y, numbers.Number)
    if xs and ys:
        return op.fn(np.float32(x), np.float32(y)).item()
    for v, n in ((x, "x"), (y, "y")):
        if not isinstance(v, numbers.Number):
            C.tensor(v, api, n)
            C.on_chip(v, api, n)
    tiles = [v for v in (x, y) if isinstance(v, NkiTensor)]
    if xs or ys:
        data, scalar, rev = (y, x, True) if xs else (x, y, False)
        shape = data.shape
    else:
        if x.shape[0] != y.shape[0]:
            raise_error("err_num_partition_mismatch",
                        f"x has {x.shape[0]} partitions and y has {y.shape[0]}",
                        instruction=api, operand="y",
                        hint="broadcast the smaller operand with nl.broadcast_to / .broadcast_to(shape)")
        if x.shape == y.shape or (C.free_size(x) == C.free_size(y) and C.free_size(x) > 1):
            data = scalar = None
            rev, shape = False, x.shape
        elif C.free_size(y) == 1:
            data, scalar, rev, shape = x, y, False, x.shape
        elif C.free_size(x) == 1:
            data, scalar, rev, shape = y, x, True, y.shape
        else:
            raise_error("err_shape_mismatch",
                        f"x {list(x.shape)} and y {list(y.shape)}: operands need equal shapes or one "
                        f"(P, 1) vector operand", instruction=api, operand="y")
    if out is None:
        rd = dtype if dtype is not None else dt.promote(*(t.dtype for t in tiles))
        out = _new_tile(shape, rd, api)
    if data is None:
        vector_engine.tensor_tensor(out, x, y, op)
    else:
        eng = E.gpsimd if op.gpsimd else E.unknown
        vector_engine.tensor_scalar(out, data, op, scalar, reverse0=rev, engine=eng)
    return out


register_language(unary=_unary, binary=_binary, copy=copy_tile)
