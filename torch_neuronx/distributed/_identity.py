"""What a neuron process group answers about itself (its backend name, group name and description).

Shared by the real group (process_group.ProcessGroupNeuron) and the dry run's fake one
(plan/distributed/fake_group.DryRunProcessGroup), so scripts that check the backend see "neuron"
either way. The C++ ProcessGroup calls these through its trampolines.
"""
from __future__ import annotations

import torch

from ._names import BACKEND_NAME


class NeuronGroupIdentity:
    """Mixin for a dist.ProcessGroup subclass that sets `_group_name` and `_group_desc` in __init__."""

    _group_name: str
    _group_desc: str

    def getBackendName(self) -> str:  # noqa: N802 - C++ trampoline name
        return BACKEND_NAME

    def name(self) -> str:
        return BACKEND_NAME

    def _get_backend_name(self) -> str:
        return BACKEND_NAME

    def setGroupName(self, name: str) -> None:  # noqa: N802
        self._group_name = name

    def getGroupName(self) -> str:  # noqa: N802
        return self._group_name

    _set_group_name = setGroupName   # c10d calls both spellings

    def setGroupDesc(self, desc: str) -> None:  # noqa: N802
        self._group_desc = desc

    def getGroupDesc(self) -> str:  # noqa: N802
        return self._group_desc

    _set_group_desc = setGroupDesc

    @property
    def group_name(self) -> str:
        return self._group_name

    @property
    def group_desc(self) -> str:
        return self._group_desc

    @property
    def _device_types(self) -> list[torch.device]:
        return [torch.device(BACKEND_NAME), torch.device("cpu")]
