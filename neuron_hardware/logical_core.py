"""One logical NeuronCore of an instance type at an LNC: the one place per-logical-core figures come from.

LNC=2 pairs two physical cores of a chip into one logical core, with their engines, their share of
the chip's HBM and of its HBM bandwidth (docs/hardware-sources.md C1, C2 "logical NeuronCore
configuration"). The runtime (device count, HBM capacity), the tools (neuron-ls rows, torus), the
cost model (peaks, bandwidths) and the planner (cores per instance, HBM per core) all read this
view, built by `logical_core_view` after one validation with one wording of each bad input.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from .chips import ChipSpec
from .instances import INSTANCES, InstanceSpec


class HardwareChoiceError(ValueError):
    """An instance type or LNC the hardware table does not have; the message names where the value
    came from (argument, flag or environment variable) and the values to use instead."""

    def __init__(self, message: str, source: str):
        super().__init__(message)
        self.source = source   # the argument, flag or variable that holds the bad value


@dataclass(frozen=True)
class LogicalCoreView:
    instance: InstanceSpec
    name: str                         # "trn2.48xlarge LNC=2"
    lnc: int                          # physical cores per logical core
    chips: int                        # per instance
    topology: str                     # chips linked as "single", "torus" (2D torus) or "switch"
    cores_per_chip: int               # logical
    cores_per_instance: int           # logical
    hbm_bytes: int                    # HBM capacity of one logical core
    hbm_bytes_per_s: float            # HBM bandwidth of one logical core
    dma_bytes_per_s: float            # DMA bandwidth of one logical core
    sbuf_bytes: int                   # on-chip SBUF of one logical core (its physical cores' together)
    tensor_flops: Mapping[str, float]  # dense TensorEngine peak of one logical core, by dtype name
    neuronlink_bytes_per_s: float     # per chip, chip to chip inside the instance
    efa_bytes_per_s: float            # per instance, to other instances (0: no figure)

    def __repr__(self) -> str:
        return f"LogicalCoreView({self.name!r}: {self.cores_per_instance} cores, {self.hbm_bytes} HBM bytes each)"

    @property
    def chip(self) -> ChipSpec:
        return self.instance.chip

    def tensor_peak(self, dtype_name: str) -> float:
        """TensorEngine FLOP/s of one logical core for a dtype name; raises naming the known ones."""
        return self.chip.tensor_peak(dtype_name) * self.lnc

    def physical_cores(self, chip_index: int, core_in_chip: int) -> tuple[int, ...]:
        """Instance-wide physical core ids of logical core `core_in_chip` of chip `chip_index`
        (LNC=2: logical core i of chip c holds 8c+2i and 8c+2i+1 on trn2)."""
        first = chip_index * self.chip.physical_cores + core_in_chip * self.lnc
        return tuple(range(first, first + self.lnc))

    def torus_neighbours(self, chip_index: int) -> tuple[int, ...]:
        """The chips wired to `chip_index` in the instance's 4x4 grid, in neuron-ls order (up, left,
        down, right; docs/hardware-sources.md E, neuron-ls example); () on a one-chip instance."""
        rows, cols = self.instance.torus_shape
        if self.chips < 2 or rows * cols != self.chips:
            return ()
        r, c = divmod(chip_index, cols)
        return (((r - 1) % rows) * cols + c, r * cols + (c - 1) % cols,
                ((r + 1) % rows) * cols + c, r * cols + (c + 1) % cols)


def view_attribute(name: str) -> property:
    """A read-only attribute of a record built on a view (its `view` field), read from the view."""
    return property(lambda self: getattr(self.view, name), doc=f"the logical-core view's {name}")


class OnLogicalCore:
    """Base of a record built on one view (its `view` field): the view's instance, LNC and chip."""

    view: LogicalCoreView
    instance = view_attribute("instance")
    lnc = view_attribute("lnc")
    chip = view_attribute("chip")


def _named(source: str, value: str) -> str:
    """`--lnc 3` for a command-line flag, `lnc=3` for an argument or variable."""
    return f"{source} {value}" if source.startswith("--") else f"{source}={value}"


def _shown(value) -> str:
    """repr of a value for a message, a long string cut short (a variable may be any length)."""
    if isinstance(value, str) and len(value) > 60:
        return repr(value[:60]) + f"... ({len(value)} characters)"
    return repr(value)


def logical_core_view(instance: str, lnc: int | None = None, *, instance_from: str = "instance",
                      lnc_from: str = "lnc") -> LogicalCoreView:
    """The logical core of `instance` at `lnc` (None: the chip's default LNC).

    `instance_from` / `lnc_from` name where each value came from (an argument, a `--flag` or an
    environment variable), so the one error message names what the user set.
    """
    spec = INSTANCES.get(instance) if isinstance(instance, str) else None
    if spec is None:
        raise HardwareChoiceError(f"{_named(instance_from, _shown(instance))} is not a known instance type; "
                                  f"use one of: {', '.join(sorted(INSTANCES))}.", instance_from)
    chip = spec.chip
    if lnc is None:
        lnc = chip.default_lnc
    if isinstance(lnc, bool) or not isinstance(lnc, int) or lnc not in chip.supported_lnc:
        allowed = " or ".join(str(v) for v in chip.supported_lnc)
        raise HardwareChoiceError(f"{_named(lnc_from, _shown(lnc))} is not supported on {chip.name}; use {allowed}.",
                                  lnc_from)
    per_chip = chip.physical_cores // lnc
    return LogicalCoreView(
        instance=spec, name=f"{spec.name} LNC={lnc}", lnc=lnc, chips=spec.chips, topology=spec.topology,
        cores_per_chip=per_chip, cores_per_instance=per_chip * spec.chips,
        hbm_bytes=chip.hbm_bytes // per_chip,
        hbm_bytes_per_s=chip.hbm_bytes_per_s / chip.physical_cores * lnc,
        dma_bytes_per_s=chip.dma_bytes_per_s / chip.physical_cores * lnc,
        sbuf_bytes=chip.partitions * chip.sbuf_partition_bytes * lnc,
        tensor_flops=MappingProxyType({k: v * lnc for k, v in chip.tensor_flops.items()}),
        neuronlink_bytes_per_s=spec.neuronlink_bytes_per_s, efa_bytes_per_s=spec.efa_bytes_per_s,
    )
