"""Run one kernel launch on the simulator: wrap inputs as HBM tensors, execute every SPMD
program in order, check and convert outputs, write mutated inputs back."""
from __future__ import annotations

import inspect
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..errors import raise_error
from .._core import buffers as B
from .._core import dtypes as dt
from .._core.tensor import NkiTensor, _c_strides
from ..targets import get_target
from ..typing import TensorType
from . import engine_io as io
from .context import Run, activate
from .memory import Storage
from .report import RunReport

_last = {"report": None}
_tls = threading.local()


@dataclass
class TensorSpec:
    """Shape and dtype of a kernel output (from a trace)."""
    shape: tuple
    dtype: np.dtype


@dataclass
class SimResult:
    outputs: object          # numpy arrays in the kernel's return structure
    report: RunReport
    mutated: tuple           # names of parameters the kernel wrote (and were written back)


def last_report() -> RunReport | None:
    """Report of the last simulated run in this thread (else in the process)."""
    return getattr(_tls, "report", None) or _last["report"]


# ------------------------------------------------------------------ inputs
_TORCH_TO_ML = {"bfloat16": "bfloat16", "float8_e4m3fn": "float8_e4m3fn",
                "float8_e5m2": "float8_e5m2", "float8_e4m3fnuz": None}


def _is_torch(x) -> bool:
    return type(x).__module__.split(".")[0] == "torch" and "torch" in sys.modules


def is_array_like(x) -> bool:
    if isinstance(x, (np.ndarray, NkiTensor)) or _is_torch(x) and hasattr(x, "shape"):
        return True
    if isinstance(x, (str, bytes, int, float, bool, tuple, list, dict)) or x is None:
        return False
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return True
    return hasattr(x, "__array__") or hasattr(x, "__dlpack__") or callable(getattr(x, "numpy", None))


def to_numpy(x) -> np.ndarray:
    """A numpy array for ``x`` (sharing memory where possible, so writes reach ``x``)."""
    if isinstance(x, np.ndarray):
        return x
    if _is_torch(x):
        t = x.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        name = str(t.dtype).replace("torch.", "")
        if name in _TORCH_TO_ML:
            import torch
            ml = dt.canonical(name)
            raw = t.view(torch.int16 if ml.itemsize == 2 else torch.uint8).numpy()
            return raw.view(ml)
        return t.numpy()
    if hasattr(x, "__array__"):
        return np.asarray(x)
    if hasattr(x, "__dlpack__"):
        return np.from_dlpack(x)
    return np.asarray(x.numpy())


def _spec_of(x):
    """(shape, dtype) of an array-like, including shape/dtype-only objects (meta tensors)."""
    if isinstance(x, np.ndarray):
        return x.shape, x.dtype
    if not (hasattr(x, "shape") and hasattr(x, "dtype")):
        a = to_numpy(x)
        return a.shape, a.dtype
    shape = tuple(int(s) for s in x.shape)
    d = x.dtype
    if not isinstance(d, np.dtype):
        name = str(d).replace("torch.", "")
        d = dt.canonical(name)
    return shape, d


def _check_arg_type(x, name):
    if isinstance(x, list):
        raise_error("err_unsupported_argument_type",
                    f"argument '{name}' is a list; kernel arguments may be tuples but not lists",
                    instruction="nki.jit", operand=name, hint="pass a tuple instead of a list")
    if isinstance(x, tuple):
        for i, v in enumerate(x):
            _check_arg_type(v, f"{name}[{i}]")
    elif isinstance(x, dict):
        for k, v in x.items():
            if not isinstance(k, str):
                raise_error("err_unsupported_argument_type", f"argument '{name}' is a dict with a "
                            f"non-string key {k!r}", instruction="nki.jit", operand=name)
            _check_arg_type(v, f"{name}[{k!r}]")
    elif not (x is None or isinstance(x, (bool, int, float, str, np.integer, np.floating))
              or is_array_like(x) or isinstance(x, NkiTensor)):
        if not hasattr(x, "__dataclass_fields__"):
            raise_error("err_unsupported_argument_type",
                        f"argument '{name}' has unsupported type {type(x).__name__}",
                        instruction="nki.jit", operand=name)


def arg_key(x):
    """Cache-key part for one argument: tensors by shape/dtype, constants by value."""
    if is_array_like(x):
        shape, d = _spec_of(x)
        return ("T", shape, dt.name_of(d))
    if isinstance(x, tuple):
        return ("tuple",) + tuple(arg_key(v) for v in x)
    if isinstance(x, dict):
        return ("dict",) + tuple((k, arg_key(v)) for k, v in sorted(x.items()))
    try:
        hash(x)
    except TypeError:
        return ("repr", type(x).__name__, repr(x))
    return ("C", type(x).__name__, x)


# ----------------------------------------------------------------- running
def bind(fn, args, kwargs):
    sig = inspect.signature(fn)
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise_error("err_unsupported_argument_type",
                        f"kernel '{fn.__name__}' uses *{p.name}; NKI kernel signatures cannot use "
                        f"* or ** parameters", instruction="nki.jit", operand=p.name,
                        hint="list the parameters explicitly")
    ba = sig.bind(*args, **kwargs)
    ba.apply_defaults()
    return sig, ba


def _wrap_input(run, x, name, ann, mutable, meta):
    shape, d = _spec_of(x) if meta else (None, None)
    if not meta:
        arr = to_numpy(x)
        d = dt.canonical(arr.dtype, what=f"argument '{name}'")
        shape = arr.shape
    else:
        d = dt.canonical(d, what=f"argument '{name}'")
        arr = None
    if isinstance(ann, TensorType) and ann.shape is not None and tuple(ann.shape) != tuple(shape):
        raise_error("err_annotation_shape_mismatch",
                    f"argument '{name}' has shape {list(shape)} but is annotated {ann!r}",
                    instruction="nki.jit", operand=name)
    if arr is not None:
        data = np.ascontiguousarray(arr).astype(dt.storage_dtype(d, run.precise), copy=True)
        st = Storage(shape, d, B.hbm, name, precise=run.precise, data=data)
    else:
        st = Storage(shape, d, B.hbm, name, precise=run.precise, fill=False)
    st.is_input = True
    st.param_name = name
    st.mutable = bool(mutable)
    st.written = False
    t = NkiTensor(st, 0, shape, _c_strides(shape), d, name)
    return t, arr


def _convert_outputs(out, run, meta, inputs):
    if isinstance(out, NkiTensor):
        st = out._st
        if st.is_input:
            if not st.mutable:
                raise_error("err_output_not_in_shared_hbm",
                            f"the kernel returns its input '{st.param_name}'", instruction="return")
        elif st.buffer is not B.shared_hbm:
            raise_error("err_output_not_in_shared_hbm",
                        f"returned tensor {out.name or ''} {list(out.shape)} lives in "
                        f"'{out.buffer.name}'", instruction="return")
        if not st.written:
            raise_error("err_tensor_output_not_written_to",
                        f"returned tensor {out.name or ''} {list(out.shape)} was never written",
                        instruction="return")
        if meta:
            return TensorSpec(out.shape, out.dtype)
        v = np.array(io.np_view(out))
        return v.astype(out.dtype) if v.dtype != out.dtype else v
    if isinstance(out, tuple):
        return tuple(_convert_outputs(o, run, meta, inputs) for o in out)
    if isinstance(out, list):
        return [_convert_outputs(o, run, meta, inputs) for o in out]
    if isinstance(out, dict):
        return {k: _convert_outputs(v, run, meta, inputs) for k, v in out.items()}
    return out


def _grid_tuple(grid):
    if grid is None:
        return (1,)
    g = grid if isinstance(grid, tuple) else (grid,)
    g = tuple(int(v) for v in g)
    if not g or any(v <= 0 for v in g):
        raise ValueError(f"launch grid {grid!r} must be positive integers")
    return g


def run_kernel(fn, args=(), kwargs=None, *, grid=None, target=None, mutable_args=(),
               compute=True, check_capacity=None, kernel_name=None) -> SimResult:
    """Simulate ``fn(*args, **kwargs)`` once per program of ``grid``.

    Array-like arguments (numpy, CPU torch tensors, objects with __array__/__dlpack__/numpy())
    become HBM tensors; everything else passes through as a compile-time constant.
    With ``compute=False`` only shapes are traced (arguments may be shape/dtype-only
    objects) and outputs are :class:`TensorSpec`.
    """
    kwargs = dict(kwargs or {})
    sig, ba = bind(fn, args, kwargs)
    tgt = get_target(target)
    g = _grid_tuple(grid)
    code = getattr(fn, "__code__", None)
    run = Run(tgt, grid=g, compute=compute, check_capacity=check_capacity, kernel_code=code,
              kernel_name=kernel_name or getattr(fn, "__name__", "kernel"))
    mutable_args = set(mutable_args or ())
    originals = {}
    t0 = time.perf_counter()
    with activate(run):
        call_args = {}
        for name, val in ba.arguments.items():
            _check_arg_type(val, name)
            ann = sig.parameters[name].annotation
            if is_array_like(val) and not isinstance(val, NkiTensor):
                mut = name in mutable_args or (isinstance(ann, TensorType) and ann.mutable)
                t, arr = _wrap_input(run, val, name, ann, mut, not compute)
                call_args[name] = t
                originals[name] = (t, arr, val)
            else:
                call_args[name] = val
        result = None
        for idx in np.ndindex(*g):
            run.start_program(tuple(int(i) for i in idx))
            r = fn(**call_args)
            if idx == (0,) * len(g):
                result = r
        outputs = _convert_outputs(result, run, not compute, originals)
    mutated = []
    for name, (t, arr, orig) in originals.items():
        if t._st.written:
            mutated.append(name)
            if compute and arr is not None:
                _write_back(t, arr, orig)
    report = RunReport.from_run(run, time.perf_counter() - t0)
    _tls.report = report
    _last["report"] = report
    return SimResult(outputs, report, tuple(mutated))


def _write_back(t, arr, orig):
    src = np.array(io.np_view(t)).astype(arr.dtype)
    if arr.flags.writeable:
        arr[...] = src
    elif hasattr(orig, "copy_") and _is_torch(orig):
        import torch
        orig.copy_(torch.from_numpy(src))
    else:
        import warnings
        warnings.warn(f"nki: cannot write back mutated input '{t._st.param_name}' (read-only array)",
                      stacklevel=3)


