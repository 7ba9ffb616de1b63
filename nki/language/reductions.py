"""Reductions over trailing free axes: sum, max, min, prod, mean, var, all (Vector engine)."""
from __future__ import annotations

import numpy as np

from ..simulator import checks as C
from .._core import dtypes as dt
from . import math as M

__all__ = ["sum", "max", "min", "prod", "mean", "var", "all"]


class Reduction:
    """``nl.sum`` etc.: ``f(x, axis, dtype=None, keepdims=False)`` -> new SBUF tile.

    ``.alu`` is the ALU operator, so ``nisa.tensor_reduce(op=nl.sum, ...)`` also works.
    """

    def __init__(self, name, alu, post=None):
        self.__name__ = name
        self.name = name
        self.alu = alu
        self.post = post

    def __repr__(self):
        return f"nl.{self.name}"

    def __call__(self, x, axis, dtype=None, keepdims=False, **kw):
        from ..isa.vector_engine import reduce_axes, reduced_shape, tensor_reduce
        api = f"nl.{self.name}"
        C.tensor(x, api, "x")
        C.on_chip(x, api, "x")
        axes = reduce_axes(x, axis, api, "x")
        shape = reduced_shape(x, axes, keepdims)
        out_dtype = dtype if dtype is not None else (x.dtype if dt.is_float(x.dtype) else dt.float32)
        out = M._new_tile(shape, out_dtype, api)
        if self.post == "var":
            _var(out, x, axes)
            return out
        tensor_reduce(out, self.alu, x, axis=axes, keepdims=keepdims)
        if self.post == "mean":
            from ..isa.vector_engine import tensor_scalar
            n = int(np.prod([x.shape[a] for a in axes]))
            tensor_scalar(out, out, M.multiply, 1.0 / n)
        return out


def _var(out, x, axes):
    """Population variance as one two-pass Vector instruction."""
    from ..simulator import engine_io as io
    from ..simulator.context import current
    from ..simulator.cost import vector_cycles
    run = current("nl.var")
    if run.compute:
        v = io.read(x).astype(np.float64)
        io.write(out, v.var(axis=axes).astype(np.float32).reshape(out.shape), "nl.var")
    else:
        io.write(out, 0, "nl.var")
    run.cost.compute("vector", "tensor_reduce[var]", [x], [out],
                     vector_cycles("two", [x], out, run.target))


sum = Reduction("sum", M.add)  # noqa: A001
max = Reduction("max", M.maximum)  # noqa: A001
min = Reduction("min", M.minimum)  # noqa: A001
prod = Reduction("prod", M.multiply)
mean = Reduction("mean", M.add, "mean")
var = Reduction("var", M.add, "var")
all = Reduction("all", M.logical_and)  # noqa: A001
