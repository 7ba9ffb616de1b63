"""vLLM CPU helpers that meet device tensors on neuron.

Some allocate their outputs with no device: right on vLLM's CPU platform, but on neuron it puts an output
on the host next to device inputs. Each is wrapped once to run with the device of its first tensor argument
as the default device (`with torch.device(...)`), which changes only where those unplaced allocations go.
The sampler's random path mixes host generators with the logits; it runs on the host."""
from __future__ import annotations

import importlib

import torch

from ..._wrap import wrap_once

# module -> functions whose unplaced allocations belong on their inputs' device
_UNPLACED = {
    "vllm._custom_ops": ("onednn_mm",),  # its output tensor
}
# module -> functions that run on the host, their tensor arguments copied there and their tensor results back:
# vLLM's CPU sampler draws per-request seeds from host generators (`NeuronModelRunner` keeps them on the host,
# so a seed gives the tokens it gives on vLLM's CPU platform) next to the logits it samples from.
_ON_HOST = {
    "vllm.v1.sample.ops.topk_topp_sampler": ("TopKTopPSampler.forward_cpu",),
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


def _on_host(original):
    def to(value, device):
        if isinstance(value, torch.Tensor):
            return value.to(device)
        if isinstance(value, tuple):
            return tuple(to(v, device) for v in value)
        return value

    def wrapper(*args, **kwargs):
        device = _first_device(args, kwargs)
        if device is None or device.type == "cpu":
            return original(*args, **kwargs)
        result = original(*(to(a, "cpu") for a in args), **{k: to(v, "cpu") for k, v in kwargs.items()})
        return to(result, device)

    return wrapper


def install() -> None:
    for table, make in ((_UNPLACED, _on_input_device), (_ON_HOST, _on_host)):
        for module_name, names in table.items():
            module = importlib.import_module(module_name)
            for dotted in names:
                *owners, name = dotted.split(".")
                owner = module
                for attr in owners:
                    owner = getattr(owner, attr)
                wrap_once(owner, name, make)
