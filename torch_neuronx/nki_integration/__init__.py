"""NKI kernels on neuron tensors, and NKI kernels as PyTorch custom ops.

* ``@nki.jit`` kernels called with ``device="neuron"`` tensors run (on the NeuronCore
  simulator) over the tensors' own memory and return neuron tensors
  (:mod:`.handler`, registered with ``nki.register_framework_handler`` by :func:`install`).
* :func:`nki_op` registers a function that launches NKI kernels as a
  ``torch.library.custom_op`` (eager, autograd, in-place mutation, one node under
  ``torch.compile``); :func:`wrap_nki` is TorchNeuron's explicit-launch spelling.

Importing this package is cheap: it imports ``nki`` (no numpy) and defers the rest.

Public (``__all__``): ``nki_op``, ``wrap_nki`` (also ``torch_neuronx.nki_op`` /
``torch_neuronx.wrap_nki``) and ``install()`` (called at registration). handler, op and dtypes
are internal.
"""
from __future__ import annotations

__all__ = ["install", "nki_op", "wrap_nki"]


def install() -> None:
    """Route ``@nki.jit`` calls with neuron / fake / meta torch tensors to torch-neuronx.

    Idempotent and cheap (no numpy, no simulator import).
    """
    from .handler import install as _install
    _install()


def nki_op(name, fn=None, *, mutates_args=(), device_types=None, schema=None):
    from .op import nki_op as _nki_op
    return _nki_op(name, fn, mutates_args=mutates_args, device_types=device_types, schema=schema)


def wrap_nki(kernel):
    from .op import wrap_nki as _wrap_nki
    return _wrap_nki(kernel)


nki_op.__doc__ = """Register ``fn`` (or an ``@nki.jit`` kernel) as the torch custom op ``name``.

See :func:`torch_neuronx.nki_integration.op.nki_op`."""
