"""Many ranks on one machine: the distributed half of the dry run.

In a dry run (`TORCH_NEURONX_DRY_RUN=1`) `init_process_group(backend="neuron")` rendezvouses with
no peer (_rendezvous.py) and builds a DryRunProcessGroup of the full world size (_fake_group.py):
collectives complete at once, move no data, and are recorded with their bytes, group ranks and
estimated Trainium time by the estimate layer's process-group hook. DeviceMesh, DTensor, FSDP2
and transformers' DistributedConfig run on top unchanged.

`python -m torch_neuronx.plan run --nproc-per-node N [--nnodes M] [--all-ranks] -- script.py`
(_launch.py) starts one dry-run process per rank role (_roles.py) with the environment torchrun
would give it, and merges their reports (_merge.py); each report has a "distributed" section
(_report.py). See docs/plan-distributed.md.
"""
from __future__ import annotations

from .._dry_run_env import requested_or_off

__all__ = ["install", "install_if_dry_run", "create_process_group", "group_factory"]


def install() -> None:
    """Called at registration of the "neuron" backend when the dry run is on: peer-free rendezvous
    (the report's step ends come from the dry run's step clock, plan/_steps.py)."""
    from . import _rendezvous as rendezvous

    rendezvous.install()


def install_if_dry_run() -> None:
    """At startup (torch_neuronx/_registration.py), when the process is a dry run: install()."""
    if requested_or_off():   # a bad value installs nothing here; plan.install warns about it
        install()


def group_factory(store, rank: int, size: int, timeout):
    """The group factory registered with torch_neuronx.distributed.hooks: in a dry run (the switch
    is read at each new group) the fake group of the full world size, else None (the real group)."""
    if not requested_or_off():
        return None
    return create_process_group(store, rank, size, timeout)


def create_process_group(store, rank: int, size: int, timeout):
    """The "neuron" backend's group in a dry run."""
    from ._fake_group import DryRunProcessGroup

    return DryRunProcessGroup(rank, size, timeout)
