"""Device-argument normalisation shared by every torch.neuron function."""
from __future__ import annotations

from typing import Union

import torch

DeviceLike = Union[int, str, torch.device, None]


def device_index(device: DeviceLike, optional: bool = True, *, arg: str = "device") -> int:
    """int | str | torch.device | None -> a neuron device index (None: current)."""
    if device is None:
        if not optional:
            raise ValueError(f"Expected a neuron device for {arg}, got None.")
        return torch_neuronx_core()._current_device()
    if isinstance(device, str):
        try:
            device = torch.device(device)
        except RuntimeError as err:
            raise ValueError(f"Invalid {arg} {device!r}: {err}") from None
    if isinstance(device, torch.device):
        if device.type != "neuron":
            raise ValueError(f"Expected a neuron device for {arg}, but got {device}.")
        return torch_neuronx_core()._current_device() if device.index is None else device.index
    if isinstance(device, int) and not isinstance(device, bool):
        if device < 0:
            raise ValueError(f"Invalid {arg} {device}: a device index must be >= 0.")
        return device
    raise TypeError(f"{arg} must be an int, str, torch.device or None, got {type(device).__name__}.")


def torch_neuronx_core():
    from .. import _C

    return _C
