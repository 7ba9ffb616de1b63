"""Every environment variable the nki package reads, parsed in one place.

NKI_SIMULATOR=1                      force every @nki.jit call onto the simulator
NEURON_PLATFORM_TARGET_OVERRIDE      trn1|gen2, trn2|gen3, trn3|gen4 (default here: trn2)
NKI_PRECISE_FP=0|1                   1 (default): store bf16/fp8 in their real formats;
                                     0: store everything as fp32
NKI_DMA_TRANSPOSE_AS_PE_TRANSPOSE    true: PSUM bank 7 is reserved (7 usable banks)
NKI_CHECK_CAPACITY=0|1               1 (default): enforce SBUF capacity / PSUM banks
"""
from __future__ import annotations

import os

_TRUE = {"1", "true", "yes", "on"}
_TARGETS = {"trn1": "trn1", "gen2": "trn1", "inf2": "trn1",
            "trn2": "trn2", "gen3": "trn2",
            "trn3": "trn3", "gen4": "trn3"}
DEFAULT_TARGET = "trn2"


def _flag(name: str, default: bool) -> bool:
    v = os.environ.get(name)
    if v is None or v.strip() == "":
        return default
    return v.strip().lower() in _TRUE


def simulator_forced() -> bool:
    return _flag("NKI_SIMULATOR", False)


def precise_fp() -> bool:
    return _flag("NKI_PRECISE_FP", True)


def dma_transpose_as_pe() -> bool:
    return _flag("NKI_DMA_TRANSPOSE_AS_PE_TRANSPOSE", False)


def check_capacity() -> bool:
    return _flag("NKI_CHECK_CAPACITY", True)


def normalize_target(name: str | None) -> str:
    """Map trn1/gen2/trn2/gen3/trn3/gen4 (any case) to trn1/trn2/trn3."""
    if name is None:
        return default_target()
    key = str(name).strip().lower()
    if key not in _TARGETS:
        raise ValueError(f"unknown NKI target {name!r}; expected one of trn1|gen2, trn2|gen3, trn3|gen4")
    return _TARGETS[key]


def default_target() -> str:
    v = os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE")
    if not v:
        return DEFAULT_TARGET
    return normalize_target(v)
