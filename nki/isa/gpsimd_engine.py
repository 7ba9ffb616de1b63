"""GpSimd engine (Pool): iota, affine_select, tensor_partition_reduce. SBUF only, never PSUM."""
from __future__ import annotations

import numpy as np

from .._core.ops import as_op
from ..errors import raise_error
from ..simulator import checks as C
from ..simulator import engine_io as io
from ..simulator.context import current
from ..simulator.cost import gpsimd_cycles

_WHY = "the GpSimd engine accesses SBUF only"


def _affine_values(dst, pattern, offset, channel_multiplier, instr):
    pattern = [tuple(int(v) for v in p) for p in pattern]
    counts = [n for _, n in pattern]
    if int(np.prod(counts)) != C.free_size(dst):
        raise_error("err_shape_mismatch", f"pattern {pattern} covers {int(np.prod(counts))} "
                    f"elements per partition but dst {list(dst.shape)} holds {C.free_size(dst)}",
                    instruction=instr, operand="pattern")
    P = dst.shape[0]
    v = np.full((P,) + tuple(counts), int(offset), dtype=np.int64)
    v += (np.arange(P, dtype=np.int64) * int(channel_multiplier)).reshape((P,) + (1,) * len(counts))
    for i, (step, n) in enumerate(pattern):
        shape = [1] * (len(counts) + 1)
        shape[i + 1] = n
        v += (np.arange(n, dtype=np.int64) * step).reshape(shape)
    return v.reshape(dst.shape)


def iota(dst, pattern, offset=0, channel_multiplier=0, name=None, **kw):
    """dst[p, i...] = offset + p * channel_multiplier + sum(step_k * i_k), pattern=[[step, n], ...]."""
    I = "nisa.iota"
    run = current(I)
    C.sbuf_operands(I, _WHY, dst=dst)
    v = _affine_values(dst, pattern, offset, channel_multiplier, I)
    io.write(dst, v, I)
    run.cost.compute("gpsimd", "iota", [], [dst], gpsimd_cycles([], dst))


def affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op=None,
                  offset=0, name=None, **kw):
    """dst = on_true_tile where cmp_op(offset + p*channel_multiplier + sum(step*i), 0)
    else on_false_value (e.g. causal masks with cmp_op=nl.greater_equal)."""
    I = "nisa.affine_select"
    run = current(I)
    C.sbuf_operands(I, _WHY, dst=dst, on_true_tile=on_true_tile)
    C.same_partitions(on_true_tile, dst, I, "on_true_tile", "dst")
    C.same_free(on_true_tile, dst, I, "on_true_tile", "dst")
    cmp = as_op(cmp_op if cmp_op is not None else "equal")
    if cmp is None or not cmp.cmp:
        raise_error("err_unsupported_op", f"cmp_op {cmp_op!r} must be a comparison (nl.equal, "
                    f"nl.greater_equal, ...)", instruction=I, operand="cmp_op")
    v = _affine_values(dst, pattern, offset, channel_multiplier, I)
    if run.compute:
        mask = cmp.fn(v, 0) != 0
        io.write(dst, np.where(mask, io.read(on_true_tile).reshape(dst.shape),
                               np.float32(on_false_value)), I)
    else:
        io.write(dst, 0, I)
    run.cost.compute("gpsimd", "affine_select", [on_true_tile], [dst],
                     gpsimd_cycles([on_true_tile], dst))


def tensor_partition_reduce(dst, op, data, name=None, **kw):
    """dst[1, F] = reduce(op) of data[P, F] across partitions (GpSimd)."""
    I = "nisa.tensor_partition_reduce"
    run = current(I)
    C.sbuf_operands(I, _WHY, dst=dst, data=data)
    o = as_op(op)
    if o is None or o.reduce is None:
        raise_error("err_unsupported_op", f"{op!r} cannot reduce", instruction=I, operand="op")
    C.same_free(data, dst, I, "data", "dst")
    if dst.shape[0] != 1:
        raise_error("err_num_partition_mismatch", f"dst has {dst.shape[0]} partitions; a partition "
                    f"reduction writes 1", instruction=I, operand="dst")
    if run.compute:
        v = io.read(data).reshape(data.shape[0], -1)
        io.write(dst, o.reduce(v, (0,)).reshape(dst.shape), I)
    else:
        io.write(dst, 0, I)
    run.cost.compute("gpsimd", "tensor_partition_reduce", [data], [dst],
                     gpsimd_cycles([data], dst) * 2)
