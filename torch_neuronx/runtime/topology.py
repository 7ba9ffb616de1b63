"""The virtual topology of this process: which logical NeuronCores it sees.

Chips of the instance type are split into logical cores by
NEURON_LOGICAL_NC_CONFIG (LNC=2 pairs two physical cores and their HBM into one
logical core), then NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES restrict the
cores this process sees and renumber them from 0, as the Neuron runtime does.
"""
from __future__ import annotations

from dataclasses import dataclass

from neuron_hardware import LogicalCoreView, OnLogicalCore

from . import env
from ._logical_core import hbm_bytes_per_core, resolve


MAX_VISIBLE_CORES = 127


@dataclass(frozen=True)
class LogicalCore:
    global_index: int      # index among all logical cores of the instance
    chip_index: int
    physical_cores: tuple[int, ...]  # instance-wide physical core ids
    hbm_bytes: int


@dataclass(frozen=True)
class Topology(OnLogicalCore):          # .instance, .lnc, .chip: the view's
    view: LogicalCoreView              # instance, LNC and the figures of one logical core
    cores: tuple[LogicalCore, ...]     # the visible ones, in device-index order
    total_logical_cores: int

    @property
    def device_count(self) -> int:
        return len(self.cores)


def discover() -> Topology:
    """Read the environment and build the topology; raises NeuronEnvironmentError."""
    view = resolve()
    instance, lnc, per_chip = view.instance, view.lnc, view.cores_per_chip
    hbm = hbm_bytes_per_core(view)
    all_cores = [
        LogicalCore(
            global_index=c * per_chip + i,
            chip_index=c,
            physical_cores=view.physical_cores(c, i),
            hbm_bytes=hbm,
        )
        for c in range(instance.chips)
        for i in range(per_chip)
    ]
    visible = all_cores
    try:
        selected = env.parse_core_list(env.VISIBLE_CORES, limit=len(all_cores))
    except env.CoreOutOfRange as err:
        raise env.NeuronEnvironmentError(
            f"{env.VISIBLE_CORES}={env.quote(err.raw)} names core {err.core}"
            f"{'' if err.part == str(err.core) else f' (in {env.quote(err.part)})'}, but {instance.name} with "
            f"{env.LOGICAL_NC_CONFIG}={lnc} has {len(all_cores)} logical cores (0-{len(all_cores) - 1})."
        ) from None
    if selected is not None:
        visible = [all_cores[i] for i in selected]
    num = env.parse_int(env.NUM_CORES, minimum=0)
    if num:
        if num > len(visible):
            raise env.NeuronEnvironmentError(
                f"{env.NUM_CORES}={num} asks for more cores than the {len(visible)} available."
            )
        visible = visible[:num]
    if len(visible) > MAX_VISIBLE_CORES:
        raise env.NeuronEnvironmentError(
            f"{instance.name} with {env.LOGICAL_NC_CONFIG}={lnc} has {len(visible)} logical cores, but "
            f"one PyTorch process can address at most {MAX_VISIBLE_CORES} devices (c10::DeviceIndex is "
            f"8-bit). Restrict the cores this process sees with {env.VISIBLE_CORES} (e.g. \"0-63\"), "
            f"as torchrun workers normally do."
        )
    return Topology(view=view, cores=tuple(visible), total_logical_cores=len(all_cores))


def default_device(topology: Topology) -> int:
    """Under torchrun each process starts on neuron:LOCAL_RANK, as accelerate and
    transformers both expect (when LOCAL_RANK names a visible core)."""
    try:
        rank = env.parse_int(env.LOCAL_RANK, minimum=0)
    except env.NeuronEnvironmentError:
        return 0
    if rank is not None and rank < topology.device_count:
        return rank
    return 0
