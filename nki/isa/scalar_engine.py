"""Scalar engine (ACT): activation(op(data * scale + bias)) with accumulate registers."""
from __future__ import annotations

import numbers

import numpy as np

from .._core.ops import as_op
from .._core.tensor import NkiTensor
from ..errors import raise_error
from .._core import dtypes as dt
from ..simulator import checks as C
from ..simulator import engine_io as io
from ..simulator.context import current
from ..simulator.cost import scalar_cycles
from .enums import reduce_cmd as RC

_BIAS_DTYPES = (dt.float32, dt.float16, dt.bfloat16)


def _act_op(op, instr):
    o = as_op(op)
    if o is None or not o.act:
        raise_error("err_unsupported_op", f"{op!r} is not an activation function (e.g. nl.exp, "
                    f"nl.copy, nl.relu, nl.gelu, nl.square)", instruction=instr, operand="op")
    return o


def _check_bias(bias, data, instr):
    if bias is None:
        return
    if not isinstance(bias, NkiTensor) or not bias.buffer.on_chip or bias.dtype not in _BIAS_DTYPES \
            or C.free_size(bias) != 1:
        what = (type(bias).__name__ if not isinstance(bias, NkiTensor) else
                f"{bias.buffer.name} tensor {list(bias.shape)} {dt.name_of(bias.dtype)}")
        raise_error("err_activation_bias_invalid_type",
                    f"bias is a {what}; it must be an on-chip (P, 1) vector of fp32, fp16 or bf16",
                    instruction=instr, operand="bias")
    if bias.shape[0] != data.shape[0]:
        raise_error("err_num_partition_mismatch", f"bias has {bias.shape[0]} partitions but data "
                    f"has {data.shape[0]}", instruction=instr, operand="bias")


def _check_scale(scale, data, instr):
    if isinstance(scale, numbers.Number) and not isinstance(scale, bool):
        return
    if not isinstance(scale, NkiTensor) or not scale.buffer.on_chip or scale.dtype != dt.float32:
        what = (type(scale).__name__ if not isinstance(scale, NkiTensor) else
                f"{scale.buffer.name} tensor {dt.name_of(scale.dtype)}")
        raise_error("err_activation_scale_invalid_type",
                    f"scale is a {what}; it must be a python number or an on-chip fp32 (P, 1) vector",
                    instruction=instr, operand="scale")
    if C.free_size(scale) != 1:
        raise_error("err_activation_scale_scalar_or_vector",
                    f"scale tile {list(scale.shape)} must be (P, 1)", instruction=instr,
                    operand="scale")
    if scale.shape[0] != data.shape[0]:
        raise_error("err_num_partition_mismatch", f"scale has {scale.shape[0]} partitions but data "
                    f"has {data.shape[0]}", instruction=instr, operand="scale")


def activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
               reduce_cmd=RC.idle, name=None, **kw):
    """dst = op(data * scale + bias) on the Scalar engine.

    ``bias``: (P, 1) vector; ``scale``: number or fp32 (P, 1) vector. With ``reduce_cmd``
    the 128 per-partition fp32 accumulator registers combine each row of the result with
    ``reduce_op`` (default nl.add): reset, reduce, reset_reduce, load_reduce (start from
    ``reduce_res``). ``reduce_res`` (P, 1) receives the registers after the instruction;
    passing it with reduce_cmd idle means reset_reduce.
    """
    I = "nisa.activation"
    return _activation(dst, op, data, bias, scale, reduce_op, reduce_res, reduce_cmd, I)


def _activation(dst, op, data, bias, scale, reduce_op, reduce_res, cmd, I):
    run = current(I)
    C.on_chip_operands(I, "Scalar", dst=dst, data=data)
    o = _act_op(op, I)
    C.same_partitions(data, dst, I, "data", "dst")
    C.same_free(data, dst, I, "data", "dst")
    _check_bias(bias, data, I)
    _check_scale(scale, data, I)
    P = data.shape[0]
    if reduce_res is not None:
        C.tensor(reduce_res, I, "reduce_res")
        C.pvector(reduce_res, I, "reduce_res", P)
        if cmd == RC.idle:
            cmd = RC.reset_reduce
    rop = None
    if cmd != RC.idle:
        rop = as_op(reduce_op if reduce_op is not None else "add")
        if rop is None or rop.name not in ("add", "maximum", "minimum"):
            raise_error("err_unsupported_op", f"reduce_op {reduce_op!r}; the accumulators support "
                        f"nl.add, nl.maximum, nl.minimum", instruction=I, operand="reduce_op")
        if cmd == RC.load_reduce and reduce_res is None:
            raise_error("err_shape_mismatch", "reduce_cmd.load_reduce needs reduce_res to load "
                        "from", instruction=I, operand="reduce_res")
    shape = (P,) + (1,) * (data.ndim - 1)
    if run.compute:
        x = io.read(data)
        with np.errstate(all="ignore"):
            if not isinstance(scale, numbers.Number):
                x = x * io.read(scale).reshape(shape)
            elif scale != 1.0:
                x = x * np.float32(scale)
            if bias is not None:
                x = x + io.read(bias).reshape(shape)
            y = o.fn(x).astype(np.float32)
        io.write(dst, y.reshape(dst.shape), I)
        if cmd != RC.idle:
            acc = run.act_acc[:P]
            ident = {"add": 0.0, "maximum": -np.inf, "minimum": np.inf}[rop.name]
            if cmd == RC.reset:
                acc[...] = ident
            else:
                row = rop.reduce(y.reshape(P, -1), (1,)).reshape(P, 1)
                if cmd == RC.reduce:
                    acc[...] = rop.fn(acc, row)
                elif cmd == RC.reset_reduce:
                    acc[...] = row
                else:  # load_reduce
                    acc[...] = rop.fn(io.read(reduce_res).reshape(P, 1), row)
            if reduce_res is not None:
                io.write(reduce_res, acc.reshape(reduce_res.shape), I)
    else:
        io.write(dst, 0, I)
        if reduce_res is not None:
            io.write(reduce_res, 0, I)
    ins = [data] + [t for t in (bias, scale) if not isinstance(t, numbers.Number) and t is not None]
    outs = [dst] + ([reduce_res] if reduce_res is not None else [])
    run.cost.compute("scalar", f"activation[{o.name}]", ins, outs,
                     scalar_cycles(ins, dst, run.target, acc_read=reduce_res is not None))


def activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, name=None, **kw):
    """activation(...) whose rows are also reduced with ``reduce_op`` into ``reduce_res``."""
    return _activation(dst, op, data, bias, scale, reduce_op, reduce_res, RC.reset_reduce,
                       "nisa.activation_reduce")
