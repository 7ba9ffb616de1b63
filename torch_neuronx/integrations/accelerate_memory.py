"""`device_map="auto"` on neuron.

accelerate's `get_max_memory()` (which transformers' `device_map="auto"|"balanced"|"sequential"` uses)
knows CUDA, NPU, MLU, SDAA, MUSA, XPU and HPU but not neuron: it would report no accelerator and place the
whole model on the CPU. When neuron is the torch accelerator, this adapter answers with the free memory
of each visible NeuronCore (`torch.neuron.mem_get_info`), keyed by index as accelerate expects, plus the
CPU; a `max_memory` naming a NeuronCore that does not exist raises with the device count.
"""
from __future__ import annotations

from .._wrap import wrap_once


def _neuron_is_accelerator() -> bool:
    import torch

    try:
        acc = torch.accelerator.current_accelerator()
    except Exception:
        return False
    return acc is not None and acc.type == "neuron" and torch.neuron.is_available()


def _neuron_max_memory(max_memory, original):
    import psutil
    import torch

    count = torch.neuron.device_count()
    if max_memory is None:
        result: dict = {i: torch.neuron.mem_get_info(i)[0] for i in range(count)}
        result["cpu"] = psutil.virtual_memory().available
        return result
    from accelerate.utils import convert_file_size_to_int

    for key in max_memory:  # in place, as accelerate does: transformers reads the converted values back
        if isinstance(max_memory[key], str):
            max_memory[key] = convert_file_size_to_int(max_memory[key])
    result = {}
    for key, value in max_memory.items():
        if isinstance(key, str) and key.startswith("neuron"):
            key = torch.device(key).index or 0
        if isinstance(key, int) and not 0 <= key < count:
            raise ValueError(f"max_memory names NeuronCore {key}, but this process sees {count} NeuronCore(s) "
                             f"(torch.neuron.device_count()); use indices 0..{count - 1}.")
        if isinstance(key, str) and key not in ("cpu", "disk", "mps"):
            return original(max_memory)  # let accelerate report unknown keys itself
        result[key] = value
    devices = sorted(k for k in result if isinstance(k, int))
    return {k: result[k] for k in devices + [k for k in ("cpu", "disk") if k in result]}


def patch(module) -> None:
    """Wrap `accelerate.utils.modeling.get_max_memory` (before `accelerate.utils` re-exports it)."""
    unwrapped = module.get_max_memory

    def make(original):
        def get_max_memory(max_memory=None):
            if _neuron_is_accelerator():
                return _neuron_max_memory(max_memory, original)
            return original(max_memory)

        return get_max_memory

    get_max_memory = wrap_once(module, "get_max_memory", make)
    if get_max_memory is None:
        return
    # names bound before the patch (only when accelerate was imported before torch_neuronx registered)
    import sys

    for name in ("accelerate.utils", "accelerate.big_modeling", "transformers.integrations.accelerate"):
        other = sys.modules.get(name)
        for attr in ("get_max_memory", "accelerate_max_memory"):
            if other is not None and getattr(other, attr, None) is unwrapped:
                setattr(other, attr, get_max_memory)
