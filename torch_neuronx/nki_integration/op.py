"""``nki_op``: NKI kernels as ``torch.library`` custom ops (the NKI analogue of triton_op).

    @torch_neuronx.nki_op("mylib::rmsnorm", mutates_args=())
    def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
        return rmsnorm_kernel(x, w, eps)            # an @nki.jit kernel

    rmsnorm.register_autograd(backward, setup_context=setup)   # training
    y = rmsnorm(x_neuron, w_neuron)                  # eager
    torch.compile(f, backend="neuron")               # one graph node: torch.ops.mylib.rmsnorm

The schema comes from the type hints; the fake implementation is the same function run on
fake tensors, where every kernel launch answers with empty tensors shaped by the kernel's
traced outputs (``kernel.output_specs``), so nothing is computed while tracing.
An ``@nki.jit`` kernel (or ``kernel[grid]``) with torch type hints can be registered
directly; its ``mutates_args`` are then the kernel's mutable parameters.
"""
from __future__ import annotations

import functools

import torch

import nki
from nki.jit import _Launch

from . import handler


def _kernel_and_grid(obj):
    if isinstance(obj, _Launch):
        return obj.kernel, obj.grid
    if isinstance(obj, nki.Kernel):
        return obj, None
    return None, None


def nki_op(name, fn=None, *, mutates_args=(), device_types=None, schema=None):
    """Register ``fn`` as the custom op ``name`` ("namespace::op") and return the op.

    Args:
        fn: a function with torch type hints that launches ``@nki.jit`` kernels on its
            tensor arguments, or an ``@nki.jit`` kernel / ``kernel[grid]`` itself.
            Used as decorator when omitted.
        mutates_args: names of the parameters the op writes in place (``torch.library``
            semantics). For a kernel registered directly they are also the kernel's
            mutable parameters.
        device_types: restrict the implementation to these device types (default: all,
            so the op runs on neuron tensors and, through the simulator, on CPU tensors).
        schema: an explicit schema string instead of the one inferred from type hints.

    Returns:
        a ``torch._library.custom_ops.CustomOpDef``: callable, with ``register_autograd``,
        ``register_fake`` (to override the traced fake), ``register_kernel``.
    """
    if fn is None:
        return lambda f: nki_op(name, f, mutates_args=mutates_args, device_types=device_types,
                                schema=schema)
    if isinstance(mutates_args, str):
        if mutates_args != "unknown":
            mutates_args = (mutates_args,)
    else:
        mutates_args = tuple(mutates_args)
    kernel, grid = _kernel_and_grid(fn)
    proto = kernel.fn if kernel is not None else fn
    if schema is None:
        schema = torch.library.infer_schema(proto, mutates_args=mutates_args)

    if kernel is not None:
        mutable = () if mutates_args == "unknown" else mutates_args

        @functools.wraps(proto)
        def impl(*args, **kwargs):
            with handler.torch_outputs():
                return handler.handle(kernel, grid, args, kwargs, mutable_args=mutable)
    else:
        @functools.wraps(proto)
        def impl(*args, **kwargs):
            with handler.torch_outputs():
                return fn(*args, **kwargs)

    op = torch.library.custom_op(name, impl, mutates_args=mutates_args,
                                 device_types=device_types, schema=schema)
    # Fake: the same function on fake tensors; kernel launches return empty tensors with
    # the shapes/dtypes of the kernel's traced outputs (see handler._fake_outputs).
    op.register_fake(impl)
    op.nki_kernel = kernel
    return op


class NKICaller:
    """``wrap_nki(kernel)``: launch a kernel on torch tensors, torch tensors out.

    ``wrap_nki(k)(x, y)``, ``wrap_nki(k)[grid](x, y)``. Unlike a bare ``k(x, y)`` it also
    returns torch tensors for CPU inputs. Use it inside an :func:`nki_op` function; for
    ``torch.compile`` register the launch with :func:`nki_op` (one graph node).
    """

    def __init__(self, kernel, grid=None):
        k, g = _kernel_and_grid(kernel)
        if k is None:
            k = nki.jit(kernel)
        self.kernel = k
        self.grid = grid if grid is not None else g

    def __getitem__(self, grid):
        return NKICaller(self.kernel, grid)

    def __call__(self, *args, mutable_args=(), **kwargs):
        with handler.torch_outputs():
            return handler.handle(self.kernel, self.grid, args, kwargs, mutable_args=mutable_args)

    def __repr__(self):
        return f"wrap_nki({self.kernel!r})"


def wrap_nki(kernel) -> NKICaller:
    """Wrap an ``@nki.jit`` kernel (or plain kernel function) for launches on torch tensors."""
    return NKICaller(kernel)
