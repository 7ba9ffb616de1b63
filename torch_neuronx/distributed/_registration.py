"""Registers the c10d backend "neuron" with torch.distributed.

Runs from `import torch` (autoload), so it only touches `torch.distributed`,
which torch has already imported; gloo and the process group load lazily in
the factory, when a group is created.
"""
from __future__ import annotations

import os
from datetime import timedelta

import torch

BACKEND_NAME = "neuron"


def _create_process_group(store, rank: int, size: int, timeout: timedelta):
    if _dry_run():  # one process per rank role, no peers: the fake group of the full world size
        from ..plan.distributed import create_process_group

        return create_process_group(store, rank, size, timeout)
    from .process_group import ProcessGroupNeuron

    return ProcessGroupNeuron(store, rank, size, timeout)


def _dry_run() -> bool:
    if not os.environ.get("TORCH_NEURONX_DRY_RUN"):  # imports the planner only when asked for
        return False
    from ..plan.distributed.switch import dry_run_quiet

    return dry_run_quiet()


def register_backend() -> bool:
    """Make `backend="neuron"` known to torch.distributed; returns False when this
    torch build has no distributed support. Safe to call more than once."""
    if not torch.distributed.is_available():
        return False
    dist = torch.distributed
    from . import _flight_recorder, _monitored_barrier

    _monitored_barrier.install()  # torch's monitored_barrier names gloo alone; neuron groups run it too
    _flight_recorder.install()  # torch 2.15's flight recorder cannot record a Python process group
    if _dry_run():
        from ..plan.distributed import install as _install_dry_run

        _install_dry_run()  # init_process_group rendezvouses with no peer (plan/distributed/rendezvous.py)
    if BACKEND_NAME.upper() in dist.Backend._plugins:
        return True
    # "cpu" is listed so that a group created with backend="neuron" alone (as
    # accelerate and transformers do) is known to handle CPU tensors too; the
    # default backend for plain CPU tensors stays gloo.
    dist.Backend.register_backend(
        BACKEND_NAME, _create_process_group, devices=["neuron", "cpu"]
    )
    return True
