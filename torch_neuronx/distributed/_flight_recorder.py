"""torch 2.15 attaches its flight recorder to every new process group that does not record itself.

`distributed_c10d._maybe_attach_flight_recorder` (new in 2.15) skips groups whose every backend is in
`_FR_SELF_RECORDING_BACKENDS` or that list no device types; the neuron group is a Python ProcessGroup
subclass that lists its device types but has no C++ backend registered on it, so the recorder's
`getGroupName()` raised "Could not find the default backend type 0 for Process Group with name neuron"
and `init_process_group("neuron")` failed. torch's own comment there says such a group cannot be recorded
without C++ changes, so neuron joins the skipped backends (no flight-recorder entries for neuron groups).
"""
from __future__ import annotations

from torch.distributed import distributed_c10d as c10d

from ._names import BACKEND_NAME


def install() -> None:
    skipped = getattr(c10d, "_FR_SELF_RECORDING_BACKENDS", None)   # absent before torch 2.15
    if skipped is not None:
        skipped.add(BACKEND_NAME)
