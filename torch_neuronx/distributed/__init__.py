"""torch.distributed support for the neuron device: the c10d backend "neuron".

`dist.init_process_group(backend="neuron")` creates a `ProcessGroupNeuron`,
which moves the bytes of neuron tensors with gloo, working on CPU views of the
same host memory (no staging copies). The same group accepts CPU tensors, so
object collectives and CPU-offloaded state work with `backend="neuron"` alone.

Importing this package is cheap: the process-group module loads on first use. `gather_pair`,
`scatter_pair` (the size checks and flat views of gather/scatter transports) and
`NeuronGroupIdentity` (what a neuron group reports about itself) serve every neuron group,
the dry run's included.
"""
from __future__ import annotations

from ._flat import gather_pair, scatter_pair
from ._identity import NeuronGroupIdentity
from ._names import BACKEND_NAME
from ._registration import register_backend

__all__ = ["BACKEND_NAME", "NeuronGroupIdentity", "ProcessGroupNeuron", "gather_pair", "register_backend",
           "scatter_pair"]


def __getattr__(name: str):
    if name == "ProcessGroupNeuron":
        from .process_group import ProcessGroupNeuron

        return ProcessGroupNeuron
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
