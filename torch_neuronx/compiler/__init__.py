"""torch.compile backend "neuron" (TorchNeuron's static-shape compiler).

Importing this package is cheap: Dynamo and Inductor are imported, and neuron
registered with them, at the first compile. `neuron_backend` is the entry point
of the `torch_dynamo_backends` group, so `torch.compile(m, backend="neuron")`
resolves it without importing anything first.
"""
from __future__ import annotations

from ._metrics import get_dynamo_metrics, reset_dynamo_metrics

__all__ = ["neuron_backend", "get_dynamo_metrics", "reset_dynamo_metrics", "register"]


def neuron_backend(gm, example_inputs, **kwargs):
    """Dynamo backend: `torch.compile(model, backend="neuron", mode=..., options=...)`."""
    from ._backend import compile_graph

    return compile_graph(gm, example_inputs, **kwargs)


def register() -> None:
    """Register neuron with Dynamo and Inductor now (otherwise done at first compile);
    afterwards `backend="inductor"` also compiles neuron graphs."""
    from ._registration import register as _register

    _register()
