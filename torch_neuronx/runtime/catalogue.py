"""The instance catalogue: which Trainium chips an instance type has.

Figures are the public hardware facts (see docs/virtual-runtime.md): a trn2
chip has 8 physical NeuronCore-v3 and 96 GiB of HBM, a trn3 chip 8
NeuronCore-v4 and 144 GiB, a trn1 chip 2 NeuronCore-v2 and 32 GiB.
"""
from __future__ import annotations

from dataclasses import dataclass

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


TRN1 = Chip("trn1", "NeuronCore-v2", 2, 32 * GiB, (1,), 1)
TRN2 = Chip("trn2", "NeuronCore-v3", 8, 96 * GiB, (1, 2), 2)
TRN3 = Chip("trn3", "NeuronCore-v4", 8, 144 * GiB, (1, 2), 2)

INSTANCE_TYPES: dict[str, InstanceType] = {
    it.name: it
    for it in (
        InstanceType("trn1.2xlarge", TRN1, 1),
        InstanceType("trn1.32xlarge", TRN1, 16),
        InstanceType("trn2.3xlarge", TRN2, 1),
        InstanceType("trn2.48xlarge", TRN2, 16),
        InstanceType("trn2u.48xlarge", TRN2, 16),
        InstanceType("trn3.3xlarge", TRN3, 1),
        InstanceType("trn3.48xlarge", TRN3, 16),
    )
}

DEFAULT_INSTANCE_TYPE = "trn2.3xlarge"
