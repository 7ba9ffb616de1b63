"""The virtual NeuronCore runtime: the seam where a real Neuron runtime plugs in.

`start()` discovers the topology from the environment and hands it to the C++
core. An invalid environment does not fail here: the error is stored in the
core and raised, naming the variable, on the first use of the device.
"""
from __future__ import annotations

from . import env
from .catalogue import INSTANCE_TYPES, Chip, InstanceType
from .topology import LogicalCore, Topology, default_device, discover

_topology: Topology | None = None
_error: str | None = None


def start(core) -> None:
    global _topology, _error
    try:
        _topology = discover()
        _error = None
        capacities = [c.hbm_bytes for c in _topology.cores]
        core._configure(capacities, default_device(_topology), "")
    except env.NeuronEnvironmentError as err:
        _topology, _error = None, str(err)
        core._configure([], 0, str(err))


def topology() -> Topology:
    """The topology, or the environment error naming the bad variable."""
    if _topology is None:
        raise env.NeuronEnvironmentError(_error or "the neuron runtime has not been started")
    return _topology


def error() -> str | None:
    return _error


__all__ = ["Chip", "InstanceType", "INSTANCE_TYPES", "LogicalCore", "Topology", "env", "error",
           "start", "topology"]
