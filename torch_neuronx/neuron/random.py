"""Random number state of torch.neuron (Philox-style 16-byte (seed, offset))."""
from __future__ import annotations

from typing import Iterable

import torch

from ._utils import DeviceLike, device_index


def _generator(device: DeviceLike) -> torch.Generator:
    from .. import _C

    return _C._get_default_generator(device_index(device))


def _get_generator(device: torch.device) -> torch.Generator:
    """Default generator of a neuron device (used by AOTAutograd's RNG handling)."""
    return _generator(device)


def get_rng_state(device: DeviceLike = "neuron") -> torch.Tensor:
    """RNG state of a device as a 16-byte uint8 tensor (seed, offset)."""
    return _generator(device).get_state()


def get_rng_state_all() -> list[torch.Tensor]:
    from .device import device_count

    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state(new_state: torch.Tensor, device: DeviceLike = "neuron") -> None:
    if not isinstance(new_state, torch.Tensor):
        raise TypeError(f"new_state must be a torch.Tensor, got {type(new_state).__name__}.")
    _generator(device).set_state(new_state.detach().to("cpu", torch.uint8).contiguous())


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def manual_seed(seed: int) -> None:
    """Seed the current neuron device."""
    _generator(None).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Seed every visible neuron device."""
    from .device import device_count

    for i in range(device_count()):
        _generator(i).manual_seed(int(seed))


def seed() -> None:
    """Seed the current device with a random number."""
    _generator(None).seed()


def seed_all() -> None:
    """Seed every device with one random number."""
    from .device import device_count

    if device_count() == 0:
        return
    s = _generator(0).seed()
    for i in range(1, device_count()):
        _generator(i).manual_seed(s)


def initial_seed() -> int:
    return _generator(None).initial_seed()


class _DefaultGenerators:
    """torch.neuron.default_generators: indexable, one generator per device."""

    def __getitem__(self, idx: int) -> torch.Generator:
        return _generator(idx)

    def __len__(self) -> int:
        from .device import device_count

        return device_count()

    def __iter__(self):
        return (self[i] for i in range(len(self)))


default_generators = _DefaultGenerators()
