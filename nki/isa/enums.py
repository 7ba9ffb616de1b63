"""Enumerations of nki.isa (engine, reduce_cmd, dge_mode, oob_mode, matmul_perf_mode, nc_version)."""
from __future__ import annotations

import enum

from ..simulator.context import current_target


class engine(enum.Enum):
    unknown = 0
    tensor = 1
    vector = 2
    scalar = 3
    gpsimd = 4
    dma = 5
    sync = 6


class reduce_cmd(enum.Enum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class dge_mode(enum.Enum):
    unknown = 0
    none = 1
    swdge = 2
    hwdge = 3


class oob_mode(enum.Enum):
    error = 0
    skip = 1


class matmul_perf_mode(enum.Enum):
    none = 0
    double_row = 1


class nc_version(enum.IntEnum):
    gen2 = 2
    gen3 = 3
    gen4 = 4


class dma_engine(enum.Enum):
    dma = 0
    gpsimd_dma = 1


def get_nc_version() -> nc_version:
    """NeuronCore version of the running kernel's target (else the configured default)."""
    return nc_version[current_target().nc_version]
