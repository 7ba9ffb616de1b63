"""The instance catalogue: which Trainium chips an instance type has.

A view of the one hardware description (`neuron_hardware`, shared with the NKI
simulator and the cost model): a trn2 chip has 8 physical NeuronCore-v3 and 96
GiB of HBM, a trn3 chip 8 NeuronCore-v4 and 144 GiB, a trn1 chip 2
NeuronCore-v2 and 32 GiB (sources next to each figure in neuron_hardware/chips.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import neuron_hardware

GiB = 1 << 30


@dataclass(frozen=True)
class Chip:
    name: str                  # "trn2"
    core_version: str          # "NeuronCore-v3"
    physical_cores: int        # per chip
    hbm_bytes: int             # per chip
    supported_lnc: tuple[int, ...]
    default_lnc: int


@dataclass(frozen=True)
class InstanceType:
    name: str
    chip: Chip
    chips: int


def _chip(spec: neuron_hardware.ChipSpec) -> Chip:
    return Chip(spec.name, spec.core_version, spec.physical_cores, spec.hbm_bytes,
                spec.supported_lnc, spec.default_lnc)


CHIPS: dict[str, Chip] = {name: _chip(spec) for name, spec in neuron_hardware.CHIPS.items()}
TRN1, TRN2, TRN3 = CHIPS["trn1"], CHIPS["trn2"], CHIPS["trn3"]

INSTANCE_TYPES: dict[str, InstanceType] = {
    name: InstanceType(name, CHIPS[spec.chip.name], spec.chips)
    for name, spec in neuron_hardware.INSTANCES.items()
}

DEFAULT_INSTANCE_TYPE = neuron_hardware.DEFAULT_INSTANCE_TYPE
