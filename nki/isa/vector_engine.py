"""Vector engine (DVE): tensor_tensor, tensor_scalar, tensor_reduce, tensor_copy, memset,
reciprocal, bn_stats / bn_aggr, and the select used by nl.where.

Operands live in SBUF or PSUM (at most one PSUM input). Maths is fp32 with a cast on
write. ``engine=nisa.engine.gpsimd`` (or int32 operands) moves an instruction to GpSimd,
which cannot touch PSUM.
"""
from __future__ import annotations

import numbers

import numpy as np

from .._core.ops import as_op
from ..errors import raise_error
from .._core import dtypes as dt
from ..simulator import checks as C
from ..simulator import engine_io as io
from ..simulator.context import current
from ..simulator.cost import gpsimd_cycles, scalar_cycles, vector_cycles
from .enums import engine as E


def _op(op, instr, operand="op", kinds=("alu",)):
    o = as_op(op)
    if o is None or not any(getattr(o, k) for k in kinds):
        raise_error("err_unsupported_op", f"{op!r} is not an ALU operator usable here "
                    f"(e.g. nl.add, nl.multiply, nl.maximum)", instruction=instr, operand=operand)
    return o


def _engine_for(engine, tensors, instr, default=E.vector):
    if engine in (E.unknown, None):
        engine = default
    if engine == E.gpsimd:
        for t, n in tensors:
            if t is not None:
                C.buffer_in(t, ("sbuf",), instr, n, "GpSimd cannot access PSUM")
    elif engine not in (E.vector, E.scalar):
        raise_error("err_unsupported_op", f"engine {engine.name} cannot run {instr}",
                    instruction=instr, operand="engine")
    return engine


def _charge(run, engine, op_name, ins, dst, kind="one"):
    if engine == E.gpsimd:
        run.cost.compute("gpsimd", op_name, ins, [dst], gpsimd_cycles(ins, dst))
    elif engine == E.scalar:
        run.cost.compute("scalar", op_name, ins, [dst], scalar_cycles(ins, dst, run.target))
    else:
        run.cost.compute("vector", op_name, ins, [dst], vector_cycles(kind, ins, dst, run.target))


def _int_exact(*ts) -> bool:
    return all(t is None or isinstance(t, numbers.Number) or dt.is_int(t.dtype) for t in ts)


def tensor_tensor(dst, data1, data2, op, engine=E.unknown, name=None, **kw):
    """dst = op(data1, data2) element-wise; same partitions and elements per partition."""
    I = "nisa.tensor_tensor"
    run = current(I)
    for t, n in ((dst, "dst"), (data1, "data1"), (data2, "data2")):
        C.tensor(t, I, n)
        C.on_chip(t, I, n, "Vector")
    o = _op(op, I)
    if o.arity != 2:
        raise_error("err_unsupported_op", f"{o!r} is not a binary operator", instruction=I,
                    operand="op")
    C.same_partitions(data1, data2, I, "data1", "data2")
    C.same_partitions(data1, dst, I, "data1", "dst")
    C.same_free(data1, data2, I, "data1", "data2")
    C.same_free(data1, dst, I, "data1", "dst")
    C.at_most_one_psum([data1, data2], ["data1", "data2"], I)
    exact = _int_exact(data1, data2) and o.int_ok
    default = E.gpsimd if (o.gpsimd or (exact and data1.dtype.itemsize == 4)) else E.vector
    eng = _engine_for(engine, [(dst, "dst"), (data1, "data1"), (data2, "data2")], I, default)
    if eng == E.scalar:
        raise_error("err_unsupported_op", "tensor_tensor runs on the vector or gpsimd engine",
                    instruction=I, operand="engine")
    if run.compute:
        rd = io.read_exact if exact else io.read
        a = rd(data1).reshape(dst.shape)
        b = rd(data2).reshape(dst.shape)
        with np.errstate(all="ignore"):
            io.write(dst, o.fn(a, b), I)
    else:
        io.write(dst, 0, I)
    _charge(run, eng, f"tensor_tensor[{o.name}]", [data1, data2], dst, "two")


def _operand_value(x, data, instr, operand):
    if isinstance(x, numbers.Number):
        return np.float32(x)
    C.tensor(x, instr, operand)
    C.pvector(x, instr, operand, data.shape[0])
    return io.read(x).reshape((data.shape[0],) + (1,) * (data.ndim - 1))


def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None,
                  reverse1=False, engine=E.unknown, name=None, **kw):
    """dst = (data op0 operand0) op1 operand1; operands are scalars or (P, 1) vectors.

    ``reverseN`` swaps the operand order (operand op data).
    """
    I = "nisa.tensor_scalar"
    run = current(I)
    C.same_elements_on_chip(I, "Vector", dst, data, "data")
    o0 = _op(op0, I, "op0")
    o1 = _op(op1, I, "op1") if op1 is not None else None
    vecs = [x for x in (operand0, operand1) if not isinstance(x, numbers.Number) and x is not None]
    default = E.gpsimd if (o0.gpsimd or (o1 is not None and o1.gpsimd)) else E.vector
    eng = _engine_for(engine, [(dst, "dst"), (data, "data")] + [(v, "operand") for v in vecs], I,
                      default)
    if eng == E.scalar and run.target.nc_version == "gen3":
        names = (o0.name, o1.name if o1 else None)
        if names not in (("multiply", "add"), ("multiply", None), ("add", None)):
            raise_error("err_unsupported_op", f"ops {names} on the Scalar engine; on trn2 it supports "
                        f"only (multiply, add), (multiply) and (add)", instruction=I, operand="op0")
    if run.compute:
        v = io.read(data).reshape(dst.shape)
        a0 = _operand_value(operand0, dst, I, "operand0")
        with np.errstate(all="ignore"):
            v = o0.fn(a0, v) if reverse0 else o0.fn(v, a0)
            if o1 is not None:
                a1 = _operand_value(operand1, dst, I, "operand1")
                v = o1.fn(a1, v) if reverse1 else o1.fn(v, a1)
        io.write(dst, v, I)
    else:
        for x, n in ((operand0, "operand0"), (operand1, "operand1")):
            if x is not None and not isinstance(x, numbers.Number):
                C.pvector(x, I, n, dst.shape[0])
        io.write(dst, 0, I)
    _charge(run, eng, f"tensor_scalar[{o0.name}]", [data] + vecs, dst, "one")


def scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False,
                         reverse1=False, name=None, **kw):
    """dst = (data op0 operand0) op1 operand1 where operand0 is scalar/(P,1), operand1 a tile."""
    I = "nisa.scalar_tensor_tensor"
    run = current(I)
    for t, n in ((dst, "dst"), (data, "data"), (operand1, "operand1")):
        C.tensor(t, I, n)
        C.on_chip(t, I, n, "Vector")
    C.same_partitions(data, dst, I, "data", "dst")
    C.same_partitions(operand1, dst, I, "operand1", "dst")
    C.same_free(data, dst, I, "data", "dst")
    C.same_free(operand1, dst, I, "operand1", "dst")
    C.at_most_one_psum([data, operand1], ["data", "operand1"], I)
    o0, o1 = _op(op0, I, "op0"), _op(op1, I, "op1")
    if run.compute:
        v = io.read(data).reshape(dst.shape)
        a0 = _operand_value(operand0, dst, I, "operand0")
        b = io.read(operand1).reshape(dst.shape)
        with np.errstate(all="ignore"):
            v = o0.fn(a0, v) if reverse0 else o0.fn(v, a0)
            v = o1.fn(b, v) if reverse1 else o1.fn(v, b)
        io.write(dst, v, I)
    else:
        io.write(dst, 0, I)
    _charge(run, E.vector, "scalar_tensor_tensor", [data, operand1], dst, "two")


def reduce_axes(x, axis, instr, operand="data"):
    """Normalise ``axis`` and enforce 'trailing free axes only'."""
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = tuple(sorted({int(a) % x.ndim if -x.ndim <= int(a) < x.ndim else 10 ** 6 for a in axes}))
    if not axes or axes[-1] >= x.ndim:
        raise_error("err_unsupported_reduce_axis", f"axis {axis} out of range for a "
                    f"{x.ndim}-D operand {list(x.shape)}", instruction=instr, operand=operand)
    want = tuple(range(x.ndim - len(axes), x.ndim))
    if 0 in axes or axes != want:
        raise_error("err_unsupported_reduce_axis",
                    f"axis {axis} of operand '{operand}' {list(x.shape)}: reductions run only over "
                    f"the trailing free axes (e.g. {want if 0 not in want else (1,)}); axis 0 is the "
                    f"partition axis", instruction=instr, operand=operand)
    return axes


def reduced_shape(x, axes, keepdims):
    if keepdims:
        return tuple(1 if i in axes else n for i, n in enumerate(x.shape))
    s = tuple(n for i, n in enumerate(x.shape) if i not in axes)
    return s + (1,) * max(0, 2 - len(s))


def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, name=None, **kw):
    """dst = reduce(op) of data over trailing free axes ``axis`` (negated if ``negate``)."""
    I = "nisa.tensor_reduce"
    run = current(I)
    C.on_chip_operands(I, "Vector", dst=dst, data=data)
    o = _op(op, I, kinds=("alu",))
    if o.reduce is None:
        raise_error("err_unsupported_op", f"{o!r} cannot be used as a reduction",
                    instruction=I, operand="op")
    axes = reduce_axes(data, axis, I)
    C.same_partitions(data, dst, I, "data", "dst")
    shape = reduced_shape(data, axes, keepdims)
    if C.free_size(dst) != int(np.prod(shape[1:])):
        raise_error("err_shape_mismatch", f"dst {list(dst.shape)} cannot hold the reduced shape "
                    f"{list(shape)}", instruction=I, operand="dst")
    if run.compute:
        v = io.read(data)
        with np.errstate(all="ignore"):
            r = o.reduce(v, axes)
        io.write(dst, (-r if negate else r).reshape(dst.shape), I)
    else:
        io.write(dst, 0, I)
    _charge(run, E.vector, f"tensor_reduce[{o.name}]", [data], dst, "one")


def tensor_copy(dst, src, engine=E.unknown, name=None, **kw):
    """Copy between SBUF/PSUM tiles (e.g. PSUM eviction), casting to dst.dtype."""
    I = "nisa.tensor_copy"
    run = current(I)
    C.same_elements_on_chip(I, "Vector", dst, src, "src")
    eng = _engine_for(engine, [(dst, "dst"), (src, "src")], I)
    if run.compute:
        io.write(dst, io.read(src).reshape(dst.shape) if dt.is_float(src.dtype) or
                 dt.is_float(dst.dtype) else io.read_exact(src).reshape(dst.shape), I)
    else:
        io.write(dst, 0, I)
    _charge(run, eng, "tensor_copy", [src], dst, "one")


def memset(dst, value, engine=E.unknown, name=None, **kw):
    """Fill ``dst`` with ``value``; the value's type must match dst.dtype (float vs int)."""
    I = "nisa.memset"
    run = current(I)
    C.tensor(dst, I, "dst")
    C.on_chip(dst, I, "dst", "Vector")
    is_f = isinstance(value, (float, np.floating))
    is_i = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if (dt.is_float(dst.dtype) and not is_f) or (dt.is_int(dst.dtype) and not is_i):
        raise_error("err_memset_value_type_mismatch",
                    f"value {value!r} ({type(value).__name__}) for a {dt.name_of(dst.dtype)} tensor",
                    instruction=I, operand="value")
    eng = _engine_for(engine, [(dst, "dst")], I)
    io.write(dst, value, I)
    _charge(run, eng, "memset", [], dst, "one")


def reciprocal(dst, data, name=None, **kw):
    """dst = 1 / data (Vector engine)."""
    I = "nisa.reciprocal"
    run = current(I)
    C.same_elements_on_chip(I, "Vector", dst, data, "data")
    if run.compute:
        with np.errstate(all="ignore"):
            io.write(dst, (1.0 / io.read(data)).reshape(dst.shape), I)
    else:
        io.write(dst, 0, I)
    _charge(run, E.vector, "reciprocal", [data], dst, "one")


def tensor_unary(dst, op, data, engine=E.unknown, instr="nisa.tensor_scalar"):
    """Internal: a unary ALU op (logical_not, invert, ceil, ...) as one Vector/GpSimd instruction."""
    run = current(instr)
    C.same_elements_on_chip(instr, "Vector", dst, data, "data")
    eng = _engine_for(engine, [(dst, "dst"), (data, "data")], instr)
    if run.compute:
        rd = io.read_exact if (dt.is_int(data.dtype) and op.int_ok) else io.read
        with np.errstate(all="ignore"):
            io.write(dst, op.fn(rd(data)).reshape(dst.shape), instr)
    else:
        io.write(dst, 0, instr)
    _charge(run, eng, op.name, [data], dst, "one")


def select(dst, pred, on_true, on_false, instr="nl.where"):
    """Internal: dst = on_true where pred != 0 else on_false (tiles or scalars)."""
    run = current(instr)
    C.on_chip(dst, instr, "dst", "Vector")
    tiles = [(pred, "condition"), (on_true, "x"), (on_false, "y")]
    for t, n in tiles:
        if not isinstance(t, numbers.Number):
            C.tensor(t, instr, n)
            C.on_chip(t, instr, n, "Vector")
            C.same_partitions(t, dst, instr, n, "dst")
            C.same_free(t, dst, instr, n, "dst")
    C.at_most_one_psum([t for t, _ in tiles if not isinstance(t, numbers.Number)],
                       [n for t, n in tiles if not isinstance(t, numbers.Number)], instr)
    if run.compute:
        def val(t):
            return t if isinstance(t, numbers.Number) else io.read(t).reshape(dst.shape)
        io.write(dst, np.where(val(pred) != 0, val(on_true), val(on_false)), instr)
    else:
        io.write(dst, 0, instr)
    ins = [t for t, _ in tiles if not isinstance(t, numbers.Number)]
    _charge(run, E.vector, "select", ins, dst, "two")


def bn_stats(dst, data, name=None, **kw):
    """Per-partition batch-norm statistics of ``data`` [P, F<=512] into dst [P, 6].

    Layout (simulator-defined, consumed by bn_aggr): (count, mean, M2) of the even and
    of the odd elements.
    """
    I = "nisa.bn_stats"
    run = current(I)
    C.on_chip_operands(I, "Vector", dst=dst, data=data)
    C.same_partitions(data, dst, I, "data", "dst")
    F = C.free_size(data)
    if F > 512:
        raise_error("err_size_of_dimension_exceed_arch_limit",
                    f"data free size {F} exceeds bn_stats_fmax 512", instruction=I, operand="data")
    if C.free_size(dst) != 6:
        raise_error("err_shape_mismatch", f"dst {list(dst.shape)} must be [P, 6]",
                    instruction=I, operand="dst")
    if run.compute:
        v = io.read(data).reshape(data.shape[0], F)
        out = np.zeros((data.shape[0], 6), np.float32)
        for k, part in enumerate((v[:, 0::2], v[:, 1::2])):
            n = part.shape[1]
            if n:
                m = part.mean(axis=1)
                out[:, 3 * k] = n
                out[:, 3 * k + 1] = m
                out[:, 3 * k + 2] = ((part - m[:, None]) ** 2).sum(axis=1)
        io.write(dst, out.reshape(dst.shape), I)
    else:
        io.write(dst, 0, I)
    _charge(run, E.vector, "bn_stats", [data], dst, "one")


def bn_aggr(dst, data, name=None, **kw):
    """Combine bn_stats results [P, 6*k] into (mean, variance) [P, 2]."""
    I = "nisa.bn_aggr"
    run = current(I)
    C.on_chip_operands(I, "Vector", dst=dst, data=data)
    C.same_partitions(data, dst, I, "data", "dst")
    F = C.free_size(data)
    if F % 6 or C.free_size(dst) != 2:
        raise_error("err_shape_mismatch", f"data {list(data.shape)} must be [P, 6*k] and dst "
                    f"{list(dst.shape)} [P, 2]", instruction=I, operand="data")
    if run.compute:
        s = io.read(data).reshape(data.shape[0], -1, 3).astype(np.float64)
        n, m, m2 = s[..., 0], s[..., 1], s[..., 2]
        N = n.sum(axis=1)
        mean = (n * m).sum(axis=1) / N
        M2 = (m2 + n * (m - mean[:, None]) ** 2).sum(axis=1)
        io.write(dst, np.stack([mean, M2 / N], axis=1).astype(np.float32).reshape(dst.shape), I)
    else:
        io.write(dst, 0, I)
    _charge(run, E.vector, "bn_aggr", [data], dst, "one")
