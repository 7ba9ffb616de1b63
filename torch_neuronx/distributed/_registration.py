"""Registers the c10d backend "neuron" with torch.distributed.

Runs from `import torch` (autoload), so it only touches `torch.distributed`,
which torch has already imported; gloo and the process group load lazily in
the factory, when a group is created.
"""
from __future__ import annotations

from datetime import timedelta

import torch

from . import hooks
from ._names import BACKEND_NAME


def _create_process_group(store, rank: int, size: int, timeout: timedelta):
    # The registered override first: a dry run answers with its fake group of the full world size
    # (one process per rank role, no peers); see hooks.set_group_factory.
    group = hooks.group_override(store, rank, size, timeout)
    if group is not None:
        return group
    from .process_group import ProcessGroupNeuron

    return ProcessGroupNeuron(store, rank, size, timeout)


def register_backend() -> bool:
    """Make `backend="neuron"` known to torch.distributed; returns False when this
    torch build has no distributed support. Safe to call more than once."""
    if not torch.distributed.is_available():
        return False
    dist = torch.distributed
    from . import _flight_recorder, _monitored_barrier

    _monitored_barrier.install()  # torch's monitored_barrier names gloo alone; neuron groups run it too
    _flight_recorder.install()  # torch 2.15's flight recorder cannot record a Python process group
    if BACKEND_NAME.upper() in dist.Backend._plugins:
        return True
    # "cpu" is listed so that a group created with backend="neuron" alone (as
    # accelerate and transformers do) is known to handle CPU tensors too; the
    # default backend for plain CPU tensors stays gloo.
    dist.Backend.register_backend(
        BACKEND_NAME, _create_process_group, devices=["neuron", "cpu"]
    )
    return True
