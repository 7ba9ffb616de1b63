"""TorchNeuron's top-level `torch_neuronx.*` names that live elsewhere here.

TorchNeuron's memory-profiling guide and API say `torch_neuronx.memory_allocated()`,
`torch_neuronx.synchronize()`, ...; the one implementation of each is in
`torch.neuron` (the device module) or a subpackage. `torch_neuronx.__getattr__`
resolves these names on first use to that very object (no copies, nothing
imported at `import torch`). docs/torchneuron-names.md lists them.
"""
from __future__ import annotations

import importlib

# torch_neuronx.<name> -> torch.neuron.<name>
DEVICE_MODULE_NAMES = (
    # device and runtime
    "device_count", "current_device", "set_device", "get_device_properties", "get_device_name",
    "is_available", "synchronize", "device",
    # streams and events
    "current_stream", "default_stream", "set_stream", "stream", "StreamContext", "Stream", "Event",
    # memory (TorchNeuron memory-profiling guide)
    "empty_cache", "memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved",
    "max_memory_reserved", "memory_summary", "reset_peak_memory_stats", "reset_accumulated_memory_stats",
    "mem_get_info",
    # random numbers
    "manual_seed", "manual_seed_all", "seed", "initial_seed", "get_rng_state", "set_rng_state",
)

# torch_neuronx.<name> -> (module, attribute)
OTHER_NAMES = {
    "is_neuron_runtime_initialized": ("torch.neuron", "is_initialized"),
    "memory": ("torch.neuron", "memory"),  # torch_neuronx.memory._record_memory_history / _dump_snapshot
    "NeuronConfig": ("torch_neuronx.profiling", "NeuronConfig"),
    "ProfileMode": ("torch_neuronx.profiling", "ProfileMode"),
    "NeuronProfiler": ("torch_neuronx.profiling", "NeuronProfiler"),
}


def names() -> list[str]:
    return sorted(set(DEVICE_MODULE_NAMES) | set(OTHER_NAMES))


def resolve(name: str):
    """The object `torch_neuronx.<name>` stands for, or AttributeError."""
    if name in DEVICE_MODULE_NAMES:
        module, attr = "torch.neuron", name
    elif name in OTHER_NAMES:
        module, attr = OTHER_NAMES[name]
    else:
        raise AttributeError(f"module 'torch_neuronx' has no attribute {name!r}")
    if module == "torch.neuron":
        import torch

        return getattr(torch.neuron, attr)  # torch.neuron is registered, not importable by name
    return getattr(importlib.import_module(module), attr)
