"""Device-argument normalisation shared by every torch.neuron function.

Indices are checked here, in Python and at full width, before they reach the
C++ core: c10::DeviceIndex is 8-bit, so an unchecked 256 would become core 0
and 128 would become -128. Errors repeat what the caller passed.
"""
from __future__ import annotations

import operator
import re
from typing import Union

import torch

DeviceLike = Union[int, str, torch.device, None]

_NEURON_DEVICE_STRING = re.compile(r"neuron(?::([+-]?\d+))?")


def device_index(device: DeviceLike, optional: bool = True, *, arg: str = "device") -> int:
    """int | str | torch.device | None -> a valid neuron device index (None: current).

    Errors name `arg` and repeat `device`: ValueError for a malformed, negative
    or non-neuron device, TypeError for another type, RuntimeError ("invalid
    device ordinal", as CUDA) past the visible cores, and the environment's
    own error when the environment is broken.
    """
    if device is None:
        if not optional:
            raise ValueError(f"Expected a neuron device for {arg}, got None.")
        return torch_neuronx_core()._current_device()
    if isinstance(device, str):
        match = _NEURON_DEVICE_STRING.fullmatch(device.strip())
        if match is None:
            try:
                parsed = torch.device(device)
            except RuntimeError as err:
                raise ValueError(f"Invalid {arg} {device!r}: {err}") from None
            raise ValueError(f"Expected a neuron device for {arg}, but got {device!r} ({parsed.type}).")
        if match.group(1) is None:
            return torch_neuronx_core()._current_device()
        return _checked(int(match.group(1)), device, arg)
    if isinstance(device, torch.device):
        if device.type != "neuron":
            raise ValueError(f"Expected a neuron device for {arg}, but got {device}.")
        if device.index is None:
            return torch_neuronx_core()._current_device()
        return _checked(device.index, device, arg)
    if isinstance(device, bool):
        raise TypeError(f"{arg} must be an int, str, torch.device or None, got bool ({device!r}).")
    try:
        index = operator.index(device)  # int, numpy integers, 0-dim integer tensors
    except TypeError:
        raise TypeError(f"{arg} must be an int, str, torch.device or None, got {type(device).__name__} "
                        f"({device!r}).") from None
    return _checked(index, device, arg)


def _checked(index: int, given, arg: str) -> int:
    """`index` if it names a visible core; else an error that repeats `given`."""
    from .. import runtime

    if index < 0:
        raise ValueError(f"Invalid {arg} {given!r}: a neuron device index must be >= 0.")
    error = runtime.error()
    if error is not None:
        raise runtime.env.NeuronEnvironmentError(error)
    count = torch_neuronx_core()._device_count()
    if index >= count:
        raise RuntimeError(  # the type and words of CUDA's error
            f"neuron error: invalid device ordinal: {arg} {given!r} names neuron:{index}, which does not exist; this process sees {count} NeuronCore(s) "
            f"(torch.neuron.device_count()). Use an index below {count}, or change NEURON_RT_VISIBLE_CORES / "
            "NEURON_LOGICAL_NC_CONFIG.")
    return index


def torch_neuronx_core():
    from .. import _C

    return _C
