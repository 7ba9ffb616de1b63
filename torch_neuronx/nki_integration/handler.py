"""The ``nki`` framework handler: ``@nki.jit`` kernels called with torch tensors.

* ``device="neuron"`` tensors: the kernel reads and writes the tensors' own memory through
  zero-copy numpy views of their CPU alias (``_C._cpu_alias``); mutable arguments are
  written back in place; outputs are new tensors on the arguments' neuron device.
* fake / meta tensors (``torch.compile`` tracing, fake impls of :func:`nki_op`): nothing is
  computed; the outputs are empty tensors with the shapes/dtypes from
  ``kernel.output_specs`` (a trace of the kernel, cached per specialisation).
* CPU tensors are routed here only inside an :func:`nki_op` (``nki`` itself keeps its
  "numpy in, numpy out" contract for direct calls), and then come back as CPU tensors.
"""
from __future__ import annotations

import contextlib
import threading

import nki

_tls = threading.local()
_state = {"installed": False}


def _depth() -> int:
    return getattr(_tls, "depth", 0)


@contextlib.contextmanager
def torch_outputs():
    """Within this context CPU torch tensors also get torch (not numpy) outputs."""
    _tls.depth = _depth() + 1
    try:
        yield
    finally:
        _tls.depth -= 1


def _is_torch_tensor(x) -> bool:
    mod = type(x).__module__
    if not mod.startswith("torch"):
        return False
    import torch
    return isinstance(x, torch.Tensor)


def _is_fake(t) -> bool:
    if t.device.type == "meta":
        return True
    from torch._subclasses.fake_tensor import is_fake
    return is_fake(t)


def predicate(x) -> bool:
    """Whether an ``@nki.jit`` argument makes torch-neuronx handle the call."""
    if isinstance(x, tuple):
        return any(predicate(v) for v in x)
    if isinstance(x, dict):
        return any(predicate(v) for v in x.values())
    if not _is_torch_tensor(x):
        return False
    if x.device.type in ("neuron", "meta"):
        return True
    return _is_fake(x) or _depth() > 0


def install() -> None:
    if not _state["installed"]:
        nki.register_framework_handler(predicate, handle)
        _state["installed"] = True


def uninstall() -> None:
    nki.unregister_framework_handler(handle)
    _state["installed"] = False


# --------------------------------------------------------------------------- arguments
def _map(x, fn):
    if isinstance(x, tuple):
        return tuple(_map(v, fn) for v in x)
    if isinstance(x, dict):
        return {k: _map(v, fn) for k, v in x.items()}
    if isinstance(x, list):
        return [_map(v, fn) for v in x]
    return fn(x)


def _tensors(args, kwargs):
    found = []

    def visit(x):
        if _is_torch_tensor(x):
            found.append(x)
        return x
    _map((tuple(args), dict(kwargs)), visit)
    return found


def _device_of(tensors):
    """The one device all real tensors share (the outputs' device)."""
    devices = {t.device for t in tensors}
    if len(devices) > 1:
        raise RuntimeError(f"nki kernel arguments are on different devices {sorted(map(str, devices))}; "
                           f"move them to one neuron device first")
    (dev,) = devices
    if dev.type not in ("neuron", "cpu"):
        raise RuntimeError(f"nki kernels run on neuron tensors; got a tensor on '{dev}'")
    return dev


def _as_numpy(x):
    """Zero-copy numpy view of a torch tensor's memory (neuron: through its CPU alias)."""
    if not _is_torch_tensor(x):
        return x
    from .dtypes import numpy_view
    t = x.detach()
    if t.device.type == "neuron":
        from .. import _C
        t = _C._cpu_alias(t)
    return numpy_view(t)


# ----------------------------------------------------------------------------- outputs
def _to_device(a, device):
    import numpy as np
    import torch

    from .dtypes import torch_view
    if not isinstance(a, np.ndarray):
        return a
    a = np.ascontiguousarray(a)
    if not a.flags.writeable:
        a = a.copy()
    src = torch_view(a)
    if device.type == "cpu":
        return src
    out = torch.empty(a.shape, dtype=src.dtype, device=device)
    if out.numel():
        from .. import _C
        _C._cpu_alias(out).copy_(src)
    return out


def _fake_outputs(kernel, grid, args, kwargs, tensors, mutable_args=()):
    import torch
    from torch._subclasses.fake_tensor import maybe_get_fake_mode
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    from .dtypes import to_torch_dtype

    specs = kernel.simulate_run(grid, args, kwargs, mutable_args=tuple(mutable_args),
                                compute=False).outputs
    device = tensors[0].device
    mode = next((m for m in map(maybe_get_fake_mode, tensors) if m is not None), None)
    ctx = contextlib.nullcontext()
    if mode is not None and mode not in _get_current_dispatch_mode_stack():
        ctx = mode

    def make(s):
        if hasattr(s, "shape") and hasattr(s, "dtype") and not _is_torch_tensor(s):
            return torch.empty(tuple(s.shape), dtype=to_torch_dtype(s.dtype), device=device)
        return s
    with ctx:
        return _map(specs, make)


# ----------------------------------------------------------------------------- handler
def handle(kernel, grid, args, kwargs, *, mutable_args=()):
    """Run ``kernel[grid](*args, **kwargs)`` for torch tensors (see module docstring)."""
    tensors = _tensors(args, kwargs)
    if any(_is_fake(t) for t in tensors):
        return _fake_outputs(kernel, grid, args, kwargs, tensors, mutable_args)
    device = _device_of(tensors)
    np_args = _map(tuple(args), _as_numpy)
    np_kwargs = _map(dict(kwargs), _as_numpy)
    res = kernel.simulate_run(grid, np_args, np_kwargs, mutable_args=tuple(mutable_args))
    return _map(res.outputs, lambda a: _to_device(a, device))
