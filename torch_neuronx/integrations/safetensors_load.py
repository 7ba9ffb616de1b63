"""`safetensors.torch.load_file(path, device="neuron:N")` (and `load_model`, which calls it).

safetensors parses the device string itself, in Rust, against a fixed list of device types; "neuron" is not
on it, so the call fails with `SafetensorError: device neuron:0 is invalid`. accelerate's
`Accelerator.load_state` hits this on every multi-process neuron run: for multi-device types it loads the
model with `map_location="on_device"`, i.e. `load_model(model, file, device="neuron:<rank>")`.

For a neuron device this adapter reads the file on CPU (what safetensors does for any device before the
copy) and moves each tensor to the requested NeuronCore. Other devices go straight to safetensors.
"""
from __future__ import annotations

from .._wrap import wrap_once


def _is_neuron(device) -> bool:
    if isinstance(device, str):
        return device.split(":")[0] == "neuron"
    return getattr(device, "type", None) == "neuron"


def patch(module) -> None:
    """Wrap `safetensors.torch.load_file` (module attribute: `load_model` looks it up at call time)."""
    def make(original):
        def load_file(filename, device="cpu", **kwargs):
            if not _is_neuron(device):
                return original(filename, device=device, **kwargs)
            tensors = original(filename, device="cpu", **kwargs)
            return {name: tensor.to(device) for name, tensor in tensors.items()}

        return load_file

    wrap_once(module, "load_file", make)
