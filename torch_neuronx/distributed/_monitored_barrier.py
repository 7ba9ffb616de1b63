"""`dist.monitored_barrier` on neuron groups.

torch's `monitored_barrier` refuses every backend not named gloo
(`get_backend(group) != Backend.GLOO`) before it hands the call to the group,
although the group object it would call is our ProcessGroupNeuron, whose
`monitored_barrier` runs gloo's own over the same ranks. The wrapper takes only
calls on neuron groups past that name check, through the same steps torch runs
for gloo (not-in-group warning, default and float timeouts, timeout check);
every other call goes to torch's function unchanged.
"""
from __future__ import annotations

import warnings
from datetime import timedelta

import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

from .._torch_versions import require
from .._wrap import wrap_once
from ._names import BACKEND_NAME

# The torch minors whose distributed_c10d.monitored_barrier this wrapper repeats the steps of.
WRITTEN_FOR = ("2.13", "2.14", "2.15")


def _is_neuron_group(group) -> bool:
    if c10d._rank_not_in_group(group):  # torch warns and returns for these; leave that to it
        return False
    try:
        return c10d.get_backend(group) == BACKEND_NAME
    except (ValueError, RuntimeError):  # no default group, a destroyed group: torch's own error
        return False


def _neuron_monitored_barrier(group, timeout, wait_all_ranks: bool) -> None:
    """torch's monitored_barrier past its gloo-only check (distributed_c10d.monitored_barrier)."""
    # Checked here, not at install (which runs from `import torch`): only neuron groups take this path.
    require("torch_neuronx.distributed._monitored_barrier (repeats distributed_c10d.monitored_barrier's steps)",
            WRITTEN_FOR)
    if timeout is None:
        timeout = c10d._get_default_timeout(c10d.get_backend(group))
    elif isinstance(timeout, float):
        warnings.warn(
            "Please specify timeout arg as a timedelta. "
            f"Converting current value of {timeout} assuming it represents seconds",
            stacklevel=3,
        )
        timeout = timedelta(seconds=timeout)
    c10d._check_valid_timeout(timeout)
    group_to_use = c10d._get_default_group() if group is None else group
    return group_to_use.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)


def _make(original):
    def monitored_barrier(group=c10d.GroupMember.WORLD, timeout=None, wait_all_ranks: bool = False):
        if _is_neuron_group(group):
            return _neuron_monitored_barrier(group, timeout, wait_all_ranks)
        return original(group, timeout, wait_all_ranks)

    return monitored_barrier


def install() -> None:
    """Wrap `torch.distributed.monitored_barrier` (one function, exported by both
    `torch.distributed` and `distributed_c10d`), once."""
    wrapper = wrap_once(c10d, "monitored_barrier", _make)
    if wrapper is not None and dist.monitored_barrier is not wrapper:
        dist.monitored_barrier = wrapper
