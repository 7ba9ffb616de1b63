"""Instance types: how many chips, how they are linked, and the network out of the instance.

Sources: docs/hardware-sources.md C2 (trn1-arch.rst, trn2-arch.rst, trn3-arch.rst) [high unless stated].
"""
from __future__ import annotations

from dataclasses import dataclass

from .chips import CHIPS, TRN1, TRN2, TRN3, ChipSpec


@dataclass(frozen=True)
class InstanceSpec:
    name: str
    chip: ChipSpec
    chips: int
    topology: str                  # "single" (one chip), "torus" (2D torus of chips), "switch"
    torus_shape: tuple[int, int]   # chips per torus row x column (1, 1) when single
    neuronlink_bytes_per_s: float  # per chip, inside the instance
    efa_bytes_per_s: float         # per instance, to other instances (0: no EFA figure)


Gbps = 1e9 / 8

INSTANCES: dict[str, InstanceSpec] = {
    i.name: i
    for i in (
        # trn1.2xlarge: one chip; no network figure in the facts
        InstanceSpec("trn1.2xlarge", TRN1, 1, "single", (1, 1), TRN1.neuronlink_bytes_per_s, 0.0),
        # trn1.32xlarge: 16 chips, 2D torus, 384 GB/s/chip column [med], EFA 800 Gbps [C2]
        InstanceSpec("trn1.32xlarge", TRN1, 16, "torus", (4, 4), 384e9, 800 * Gbps),
        InstanceSpec("trn2.3xlarge", TRN2, 1, "single", (1, 1), TRN2.neuronlink_bytes_per_s, 0.0),
        # trn2.48xlarge / trn2u.48xlarge: 4x4 2D torus, NeuronLink-v3 1,024 GB/s/chip, EFAv3 3,200 Gbps [C2]
        InstanceSpec("trn2.48xlarge", TRN2, 16, "torus", (4, 4), 1024e9, 3200 * Gbps),
        InstanceSpec("trn2u.48xlarge", TRN2, 16, "torus", (4, 4), 1024e9, 3200 * Gbps),
        InstanceSpec("trn3.3xlarge", TRN3, 1, "single", (1, 1), TRN3.neuronlink_bytes_per_s, 0.0),
        # trn3.48xlarge: 16 chips of a Gen1 UltraServer server, all-to-all through NeuronSwitch-v1;
        # NeuronLink-v4 2,560 GB/s/chip [C1] (the PCIe Gen6 fabric figures of C2, 256 GB/s/chip
        # intra-server, are not used); EFA 12,800 Gbps per 4-server UltraServer -> 3,200 Gbps per
        # server [low: derived]
        InstanceSpec("trn3.48xlarge", TRN3, 16, "switch", (4, 4), 2560e9, 3200 * Gbps),
    )
}

DEFAULT_INSTANCE_TYPE = "trn2.3xlarge"


def instance(name: str) -> InstanceSpec:
    try:
        return INSTANCES[name]
    except KeyError:
        raise ValueError(f"unknown instance type {name!r}; use one of: {', '.join(sorted(INSTANCES))}") from None


assert set(CHIPS) == {i.chip.name for i in INSTANCES.values()}
