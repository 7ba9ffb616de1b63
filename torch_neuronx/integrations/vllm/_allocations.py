"""vLLM helpers that allocate their outputs with no device: on vLLM's CPU platform that is right, on neuron
it puts an output on the host next to device inputs. Each is wrapped once to run with the device of its
first tensor argument as the default device (`with torch.device(...)`), which changes only where those
unplaced allocations go."""
from __future__ import annotations

import importlib

import torch

from ..._wrap import wrap_once

# module -> functions whose unplaced allocations belong on their inputs' device
_UNPLACED = {
    "vllm._custom_ops": ("onednn_mm",),  # its output tensor
    "vllm.v1.sample.ops.topk_topp_sampler": ("TopKTopPSampler.forward_cpu",),  # the Gumbel seeds
}


def _first_device(args, kwargs):
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return value.device
    return None


def _on_input_device(original):
    def wrapper(*args, **kwargs):
        device = _first_device(args, kwargs)
        if device is None or device.type == "cpu":
            return original(*args, **kwargs)
        with device:
            return original(*args, **kwargs)

    return wrapper


def install() -> None:
    for module_name, names in _UNPLACED.items():
        module = importlib.import_module(module_name)
        for dotted in names:
            *owners, name = dotted.split(".")
            owner = module
            for attr in owners:
                owner = getattr(owner, attr)
            wrap_once(owner, name, _on_input_device)
