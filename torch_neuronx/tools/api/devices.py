"""The virtual instance as neuron-ls shows it: chips, logical cores, links.

Built from the runtime's resolver of the instance and LNC (runtime/_logical_core.py) and the
same environment variables the runtime reads (NEURON_RT_VISIBLE_CORES,
TORCH_NEURONX_HBM_BYTES_PER_CORE), but without the per-process device limit: a tool sees the
whole instance.
"""
from __future__ import annotations

import hashlib
import os
import socket
from dataclasses import dataclass, field

from neuron_hardware import LogicalCoreView, OnLogicalCore, view_attribute

from ...runtime import env
from ...runtime import hbm_bytes_per_core, resolve

# neuron-monitor's hardware names per chip (docs/hardware-sources.md E: "trainium2", "v4", "v3d" for
# trn2 at LNC=2). trn1/trn3 values are assumptions following the same scheme.
DEVICE_TYPE = {"trn1": ("trainium", "v2"), "trn2": ("trainium2", "v4"), "trn3": ("trainium3", "v5")}
CORE_VERSION = {("trn1", 1): "v2", ("trn2", 1): "v3", ("trn2", 2): "v3d", ("trn3", 1): "v4", ("trn3", 2): "v4d"}


@dataclass(frozen=True)
class ChipView:
    index: int
    logical_cores: tuple[int, ...]  # instance-wide logical core ids on this chip that are visible
    memory_bytes: int               # HBM of the chip
    connected: tuple[int, ...]      # torus neighbours: up, left, down, right (neuron-ls order)
    bdf: str = "virtual"            # no PCI device: the chip is emulated in host memory
    cpu_affinity: str = ""
    numa_node: str = "0"


@dataclass(frozen=True)
class InstanceView(OnLogicalCore):      # .instance, .lnc, .chip: the view's
    view: LogicalCoreView
    instance_id: str
    hbm_per_core: int
    chips: tuple[ChipView, ...] = field(default=())

    cores_per_chip = view_attribute("cores_per_chip")   # logical

    @property
    def instance_type(self) -> str:
        return self.instance.name

    @property
    def core_version(self) -> str:
        return CORE_VERSION.get((self.instance.chip.name, self.lnc), self.instance.chip.core_version)

    def chip_of_core(self, core: int) -> int:
        return core // self.cores_per_chip


def virtual_instance_id() -> str:
    """A stable id per host in EC2's format (i- and 17 hex digits)."""
    seed = ""
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            with open(path) as f:
                seed = f.read().strip()
                break
        except OSError:
            continue
    seed = seed or socket.gethostname()
    return "i-" + hashlib.sha256(f"torch-neuronx:{seed}".encode()).hexdigest()[:17]


def _cpu_affinity() -> str:
    cpus = sorted(os.sched_getaffinity(0))
    ranges, start = [], None
    for i, cpu in enumerate(cpus):
        if start is None:
            start = cpu
        if i + 1 == len(cpus) or cpus[i + 1] != cpu + 1:
            ranges.append(f"{start}-{cpu}" if cpu != start else str(cpu))
            start = None
    return ",".join(ranges)


def instance_view() -> InstanceView:
    """The instance under the current environment; raises NeuronEnvironmentError naming a bad variable."""
    view = resolve()
    instance, per_chip = view.instance, view.cores_per_chip
    hbm = hbm_bytes_per_core(view)
    total = view.cores_per_instance
    visible = env.parse_core_list(env.VISIBLE_CORES, limit=total)  # names the variable past the last core
    shown = set(visible) if visible is not None else set(range(total))
    affinity = _cpu_affinity()
    chips = []
    for c in range(instance.chips):
        cores = tuple(i for i in range(c * per_chip, (c + 1) * per_chip) if i in shown)
        if not cores:
            continue
        chips.append(ChipView(index=c, logical_cores=cores, memory_bytes=hbm * per_chip,
                              connected=view.torus_neighbours(c), cpu_affinity=affinity))
    return InstanceView(view=view, instance_id=virtual_instance_id(), hbm_per_core=hbm, chips=tuple(chips))
