"""Tensor creation: ndarray, zeros, ones, full, *_like, shared_constant, identity, rand."""
from __future__ import annotations

import ast
import inspect
import sys
import textwrap

import numpy as np

from ..errors import raise_error
from ..simulator.context import current
from ..simulator.memory import Storage
from .._core import buffers as B
from .._core import dtypes as dt
from .._core.tensor import NkiTensor, _c_strides

__all__ = ["ndarray", "zeros", "ones", "full", "zeros_like", "ones_like", "full_like",
           "empty_like", "shared_constant", "shared_identity_matrix", "rand", "random_seed"]

_NESTED = (ast.For, ast.AsyncFor, ast.While, ast.If, ast.Try, ast.With, ast.AsyncWith)
_NESTED_OK = (ast.With, ast.AsyncWith)   # `with nl.no_reorder():` keeps kernel level
if sys.version_info >= (3, 10):
    _NESTED = _NESTED + (ast.Match,)
_toplevel_cache: dict = {}


def _nested_line_ranges(code):
    """Line ranges (absolute) of loop/branch bodies in the kernel function's source."""
    if code in _toplevel_cache:
        return _toplevel_cache[code]
    ranges = None
    try:
        lines, start = inspect.findsource(code)
        src = textwrap.dedent("".join(inspect.getblock(lines[code.co_firstlineno - 1:])))
        tree = ast.parse(src)
        fn = next(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
        base = code.co_firstlineno - 1
        ranges = []
        for node in ast.walk(fn):
            if isinstance(node, _NESTED) and not isinstance(node, _NESTED_OK):
                ranges.append((base + node.lineno, base + node.end_lineno))
    except (OSError, TypeError, SyntaxError, StopIteration, IndexError):
        ranges = None
    _toplevel_cache[code] = ranges
    return ranges


def _check_kernel_level(run, api):
    code = run.kernel_code
    f = sys._getframe(2)
    pkg = __name__.rsplit(".", 2)[0]
    while f is not None and f.f_globals.get("__name__", "").startswith(pkg + ".") \
            and not f.f_globals.get("__name__", "").startswith(pkg + ".examples"):
        f = f.f_back
    if f is None or code is None:
        return
    if f.f_code is not code:
        raise_error("err_shared_hbm_must_in_kernel_level",
                    f"nl.shared_hbm tensor allocated in sub-function '{f.f_code.co_name}'",
                    instruction=api)
    line = f.f_lineno
    site = (line, f.f_lasti)
    ranges = _nested_line_ranges(code)
    if ranges and any(a < line <= b or a == line for a, b in ranges):
        raise_error("err_shared_hbm_must_in_kernel_level",
                    f"nl.shared_hbm tensor allocated inside a loop or branch (line {line})",
                    instruction=api)
    if site in run.shared_sites:
        raise_error("err_shared_hbm_must_in_kernel_level",
                    f"nl.shared_hbm tensor allocated repeatedly at line {line} (inside a loop)",
                    instruction=api)
    run.shared_sites.add(site)


def allocate(shape, dtype, buffer=B.sbuf, name="", *, api="nl.ndarray", fill=True) -> NkiTensor:
    """Allocate a new tensor in ``buffer`` with capacity accounting; contents are NaN / 4."""
    run = current(api)
    buffer = B.as_buffer(buffer)
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    shape = tuple(int(s) for s in shape)
    if any(s <= 0 for s in shape) or not shape:
        raise_error("err_shape_mismatch", f"tensor shape {list(shape)} must have positive sizes",
                    instruction=api, operand=name or None)
    dtype = dt.canonical(dtype)
    if buffer.on_chip:
        if len(shape) < 2:
            raise_error("err_shape_mismatch",
                        f"on-chip tensors need at least 2 dimensions (partition, free...); "
                        f"got {list(shape)}", instruction=api, operand=name or None,
                        hint="use a shape like (P, 1) or (1, N)")
        if shape[0] > 128:
            raise_error("err_num_partition_exceed_arch_limit",
                        f"number of partitions {shape[0]} exceed architecture limitation of 128 "
                        f"({buffer.name} tensor {name or ''} {list(shape)})",
                        instruction=api, operand=name or None)
    if buffer is B.shared_hbm:
        _check_kernel_level(run, api)
        if run.program != (0,) * len(run.grid):
            # later SPMD programs share the outputs created by program 0
            if run.shared_cursor < len(run.shared_allocs):
                st = run.shared_allocs[run.shared_cursor]
                run.shared_cursor += 1
                if st.shape != shape or st.dtype != dtype:
                    raise_error("err_shape_mismatch",
                                f"SPMD program {run.program} allocates shared_hbm {list(shape)} "
                                f"{dt.name_of(dtype)} where program 0 allocated {list(st.shape)} "
                                f"{dt.name_of(st.dtype)}", instruction=api)
                return NkiTensor(st, 0, shape, _c_strides(shape), dtype, name or st.name)
    st = Storage(shape, dtype, buffer, name, precise=run.precise, fill=fill)
    if buffer is B.sbuf:
        run.sbuf.allocate(st, shape[0], int(np.prod(shape[1:])) * dtype.itemsize)
    elif buffer is B.psum:
        run.psum.allocate(st, int(np.prod(shape[1:])) * dtype.itemsize)
    else:
        run.hbm_bytes += st.size * dtype.itemsize
        if buffer is B.shared_hbm:
            run.shared_allocs.append(st)
            run.shared_cursor = len(run.shared_allocs)
    return NkiTensor(st, 0, shape, _c_strides(shape), dtype, name)


def ndarray(shape, dtype, buffer=B.sbuf, name="", address=None, **kw):
    """A new uninitialised tensor (simulated memory is filled with NaN / 4)."""
    return allocate(shape, dtype, buffer, name, api="nl.ndarray")


def _typed_value(value, dtype):
    return float(value) if dt.is_float(dtype) else int(value)


def full(shape, fill_value, dtype, buffer=B.sbuf, name="", **kw):
    """A new tensor filled with ``fill_value`` (on chip: one memset instruction)."""
    t = allocate(shape, dtype, buffer, name, api="nl.full")
    _fill(t, fill_value)
    return t


def _fill(t, value):
    from ..isa.vector_engine import memset
    from ..simulator import engine_io
    if t.buffer.on_chip:
        memset(t, _typed_value(value, t.dtype))
    else:
        engine_io.write(t, np.full(t.shape, value, dtype=np.float64 if dt.is_float(t.dtype)
                                   else np.int64), "nl.full")


def zeros(shape, dtype, buffer=B.sbuf, name="", **kw):
    return full(shape, 0, dtype, buffer, name)


def ones(shape, dtype, buffer=B.sbuf, name="", **kw):
    return full(shape, 1, dtype, buffer, name)


def _like(x, dtype, buffer):
    return x.shape, (x.dtype if dtype is None else dtype), (x.buffer if buffer is None else buffer)


def zeros_like(x, dtype=None, buffer=None, name="", **kw):
    return zeros(*_like(x, dtype, buffer), name=name)


def ones_like(x, dtype=None, buffer=None, name="", **kw):
    return ones(*_like(x, dtype, buffer), name=name)


def full_like(x, fill_value, dtype=None, buffer=None, name="", **kw):
    shape, dtype, buffer = _like(x, dtype, buffer)
    return full(shape, fill_value, dtype, buffer, name)


def empty_like(x, dtype=None, buffer=None, name="", **kw):
    return ndarray(*_like(x, dtype, buffer), name=name)


def shared_constant(constant, dtype=None, name="const", **kw):
    """An HBM tensor holding a compile-time constant array."""
    from ..simulator import engine_io
    a = np.asarray(constant)
    dtype = dt.canonical(dtype if dtype is not None else
                         (np.float32 if a.dtype.kind == "f" else np.int32 if a.dtype.kind in "iu" else a.dtype))
    t = allocate(a.shape, dtype, B.hbm, name, api="nl.shared_constant")
    engine_io.write(t, a, "nl.shared_constant")
    return t


def shared_identity_matrix(n, dtype=dt.uint8, name="identity", **kw):
    """An HBM ``n x n`` identity matrix."""
    return shared_constant(np.eye(n), dtype=dtype, name=name)


_rng = {"gen": np.random.default_rng(0)}


def random_seed(seed):
    """Seed the simulator's random generator (nl.rand, nl.dropout)."""
    _rng["gen"] = np.random.default_rng(int(seed) if not isinstance(seed, NkiTensor) else 0)


def rand(shape, dtype=dt.float32, buffer=B.sbuf, name="", **kw):
    """A tile of uniform [0, 1) random numbers (GpSimd)."""
    from ..simulator import engine_io
    t = allocate(shape, dtype, buffer, name, api="nl.rand")
    engine_io.write(t, _rng["gen"].random(t.shape, dtype=np.float32), "nl.rand")
    from ..simulator.cost import gpsimd_cycles
    current("nl.rand").cost.compute("gpsimd", "rand", [], [t], gpsimd_cycles([], t))
    return t
