"""The virtual NeuronCore runtime: the seam where a real Neuron runtime plugs in.

`start()` discovers the topology from the environment and hands it to the C++
core. An invalid environment does not fail here: the error is stored in the
core and raised, naming the variable, on the first use of the device.

Public (``__all__``): ``start`` (called at registration), ``topology()`` / ``error()`` (the
discovered topology or the environment error), ``Topology``, ``LogicalCore``, the instance
catalogue (``INSTANCE_TYPES``, ``InstanceType``, ``Chip``), ``resolve`` (the one instance and LNC
resolver: arguments, else the environment variables, else the default), and the modules ``env`` (environment
variables), ``host_gemm`` (bf16/fp16 matmul modes) and ``stats_page`` (the per-process stats page
the tools read), ``hbm_bytes_per_core`` (an instance's HBM per logical core) and ``host_info`` (the
host CPU and how its bf16/fp16 matmuls run). Everything else (topology.py and
the internal _logical_core, _variables, _log, _exit_guard, _host) serves the layers above through those names.
"""
from __future__ import annotations

import logging

from neuron_hardware import INSTANCES as INSTANCE_TYPES
from neuron_hardware import ChipSpec as Chip
from neuron_hardware import InstanceSpec as InstanceType

from . import env, host_gemm, stats_page, _log as log, _variables as variables
from ._host import host_info
from ._logical_core import hbm_bytes_per_core, resolve
from .topology import LogicalCore, Topology, default_device, discover

_topology: Topology | None = None
_error: str | None = None


def start(core) -> None:
    global _topology, _error
    try:
        log.configure()  # NEURON_RT_LOG_LEVEL / _LOCATION first: the lines below go to that log
        variables.check()  # once: notices for no-effect variables, warnings for unknown names
        _topology = discover()
        _error = None
        _say_started(_topology)
        env.parse_flag(env.LAUNCH_BLOCKING)  # validated; execution is synchronous already
        cache_limit = env.parse_cache_limit(env.ALLOCATOR_CACHE_LIMIT)
        no_caching = env.parse_flag(env.NO_MEMORY_CACHING)
        host_gemm.configure(core)   # bf16/fp16 matmuls: CPU kernel or fp32 accumulation
        capacities = [c.hbm_bytes for c in _topology.cores]
        core._configure(capacities, default_device(_topology), "")
        if cache_limit is not None:
            core._set_allocator_cache_limit(cache_limit)
        if no_caching:
            core._set_allocator_no_caching(True)
        from .stats_page import publish_process

        publish_process(core, _topology)
    except env.NeuronEnvironmentError as err:
        _topology, _error = None, str(err)
        core._configure([], 0, str(err))


def _say_started(t: Topology) -> None:
    logger = logging.getLogger(log.RUNTIME_LOGGER)
    if logger.isEnabledFor(logging.INFO):
        logger.info("virtual NeuronCore runtime: %s (%s), LNC=%d, %d of %d logical cores visible, %.0f GiB HBM "
                    "per core", t.instance.name, t.chip.name, t.lnc, t.device_count, t.total_logical_cores,
                    t.cores[0].hbm_bytes / 2**30 if t.cores else 0)


def topology() -> Topology:
    """The topology, or the environment error naming the bad variable."""
    if _topology is None:
        raise env.NeuronEnvironmentError(_error or "the neuron runtime has not been started")
    return _topology


def error() -> str | None:
    return _error


__all__ = ["Chip", "InstanceType", "INSTANCE_TYPES", "LogicalCore", "Topology", "env", "error",
           "hbm_bytes_per_core", "host_gemm", "host_info", "resolve", "start", "stats_page", "topology"]
