"""`torch_neuronx.neuron_dynamo_backend`: TorchNeuron's helper API of the torch.compile backend.

The names TorchNeuron's backend reference gives, each the object of
`torch_neuronx.compiler` (the one implementation)::

    from torch_neuronx.neuron_dynamo_backend import get_dynamo_metrics, neuron_backend
    compiled = torch.compile(model, backend=neuron_backend)   # same as backend="neuron"
    get_dynamo_metrics()["graphs_compiled"]

Model names (`set_model_name`) name the artifacts under TORCH_NEURONX_DEBUG_DIR, as
`options={"model_name": ...}` does for one compile.
"""
from __future__ import annotations

from ..compiler import (get_dynamo_metrics, get_model_name, get_rank, neuron_backend, reset_dynamo_metrics,
                        set_model_name)

__all__ = ["NEFFCompilationError", "get_dynamo_metrics", "get_model_name", "get_rank",
           "neuron_backend", "reset_dynamo_metrics", "set_model_name"]


def __getattr__(name: str):
    # TorchNeuron's name for the error a failed compile raises (fallback execution off); loading it loads
    # the backend module, so only on use
    if name == "NEFFCompilationError":
        from ..compiler import NeuronCompileError

        return NeuronCompileError
    raise AttributeError(f"module 'torch_neuronx.neuron_dynamo_backend' has no attribute {name!r}")
