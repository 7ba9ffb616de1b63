"""Every environment variable the virtual runtime reads, parsed and validated
in one place. Errors name the variable and say what a valid value looks like.
"""
from __future__ import annotations

import os
import re

INSTANCE_TYPE = "TORCH_NEURONX_INSTANCE_TYPE"
HBM_BYTES_PER_CORE = "TORCH_NEURONX_HBM_BYTES_PER_CORE"
LOGICAL_NC_CONFIG = "NEURON_LOGICAL_NC_CONFIG"
VISIBLE_CORES = "NEURON_RT_VISIBLE_CORES"
NUM_CORES = "NEURON_RT_NUM_CORES"
LOCAL_RANK = "LOCAL_RANK"
ESTIMATE_ASSUMPTIONS = "TORCH_NEURONX_ESTIMATE_ASSUMPTIONS"  # estimate/assumptions.py
# 1: an op the cost model cannot cost is an error (estimate/_api.py), not a listed warning.
ESTIMATE_STRICT = "TORCH_NEURONX_ESTIMATE_STRICT"
# Execution on the virtual core is synchronous already; accepted (0 or 1) for TorchNeuron scripts.
LAUNCH_BLOCKING = "NEURON_LAUNCH_BLOCKING"
# Free device memory the caching allocator keeps cached per process (host memory backs it).
ALLOCATOR_CACHE_LIMIT = "TORCH_NEURONX_ALLOCATOR_CACHE_LIMIT"
# 1: no caching (each allocation its own segment, returned at once), as PYTORCH_NO_CUDA_MEMORY_CACHING.
NO_MEMORY_CACHING = "TORCH_NEURONX_NO_MEMORY_CACHING"
# Folder of the per-process stats pages the Neuron tools read.
RUNTIME_DIR = "TORCH_NEURONX_RUNTIME_DIR"
# 1: an op TorchNeuron does not support (docs/op-support.md, status N) raises; fallback: CPU_FALLBACK too.
STRICT_OPS = "TORCH_NEURONX_STRICT_OPS"
# bf16/fp16 matmuls on the host: auto | native | fp32 (runtime/host_gemm.py).
HOST_LOW_PRECISION_GEMM = "TORCH_NEURONX_HOST_LOW_PRECISION_GEMM"
# 1: compile-only mode: torch.compile graphs compile (and fill the cache) but never execute;
# their outputs are uninitialised tensors of the right shapes (compiler/_compile_only.py).
COMPILE_ONLY = "TORCH_NEURONX_COMPILE_ONLY"
# Metrics of compiled graphs (torch_neuronx.metrics): on/off, the tables written as CSV at exit
# (comma-separated names), and their folder.
METRICS_ENABLED = "TORCH_NEURONX_METRICS_ENABLED"
ENABLED_METRIC_TABLES = "TORCH_NEURONX_ENABLED_METRIC_TABLES"
METRICS_DIR = "TORCH_NEURONX_METRICS_DIR"
DEFAULT_METRICS_DIR = "/tmp"   # TorchNeuron's documented default (its env-vars reference)


class NeuronEnvironmentError(RuntimeError):
    """An environment variable of the Neuron runtime has an invalid value."""


class CoreOutOfRange(NeuronEnvironmentError):
    """A core list names a core past the instance's (the caller words the message)."""

    def __init__(self, raw: str, part: str, core: int):
        super().__init__(f"{quote(raw)} names core {core} (in {quote(part)})")
        self.raw, self.part, self.core = raw, part, core


def quote(raw: str, limit: int = 60) -> str:
    """repr of a value for an error message, cut short (a value may be any length)."""
    return repr(raw) if len(raw) <= limit else repr(raw[:limit]) + f"... ({len(raw)} characters)"


def get(name: str) -> str | None:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return None
    return value.strip()


def parse_int(name: str, minimum: int = 0) -> int | None:
    raw = get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise NeuronEnvironmentError(
            f"{name}={quote(raw)} is not an integer; set it to a whole number >= {minimum} or unset it."
        ) from None
    if value < minimum:
        raise NeuronEnvironmentError(f"{name}={quote(raw)} must be >= {minimum}.")
    return value


_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1 << 10, "m": 1000**2, "mb": 1000**2,
               "mib": 1 << 20, "g": 1000**3, "gb": 1000**3, "gib": 1 << 30}


def parse_bytes(name: str) -> int | None:
    """A size such as 1073741824, 512MiB or 2GB."""
    raw = get(name)
    if raw is None:
        return None
    match = re.fullmatch(r"(\d+)\s*([a-zA-Z]*)", raw)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _SIZE_UNITS:
        raise NeuronEnvironmentError(
            f"{name}={quote(raw)} is not a size; use bytes (1073741824) or a unit (512MiB, 2GiB, 4GB)."
        )
    value = int(match.group(1)) * _SIZE_UNITS[unit]
    if value <= 0:
        raise NeuronEnvironmentError(f"{name}={quote(raw)} must be a positive size.")
    if value > MAX_BYTES:
        raise NeuronEnvironmentError(
            f"{name}={quote(raw)} is {value} bytes, more than the {MAX_BYTES} (1 PiB) the virtual runtime accepts "
            "(sizes are 64-bit inside the core); use a size such as 24GiB, or unset it.")
    return value


def parse_flag(name: str) -> bool | None:
    """A 0/1 switch (also true/false, yes/no, on/off)."""
    raw = get(name)
    if raw is None:
        return None
    value = raw.lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise NeuronEnvironmentError(f"{name}={raw!r} is not a switch; set it to 1 or 0, or unset it.")


def parse_cache_limit(name: str) -> int | None:
    """A size as parse_bytes, or 0 (keep nothing cached)."""
    raw = get(name)
    if raw is not None and raw.strip("0") == "":
        return 0
    return parse_bytes(name)


# Largest size a variable may give: far above any real HBM, and small enough
# that the core's 64-bit byte counts can never overflow adding a few of them.
MAX_BYTES = 1 << 50


def parse_core_list(name: str, limit: int) -> list[int] | None:
    """NEURON_RT_VISIBLE_CORES syntax: "2", "0-3", "0,2,5" or "0-1,4", each index below `limit`.

    Every index is checked against `limit` before a range is expanded, so a
    typo such as "0-400000000" is an error, not a list of 400 million cores.
    """
    raw = get(name)
    if raw is None:
        return None
    cores: list[int] = []
    for part in raw.split(","):
        part = part.strip()
        match = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", part)
        if match is None:
            raise NeuronEnvironmentError(
                f"{name}={quote(raw)} is malformed at {part!r}; use a core index (\"2\"), a range "
                f"(\"0-3\") or a comma-separated list (\"0,2,5\")."
            )
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            raise NeuronEnvironmentError(f"{name}={quote(raw)}: range {part!r} ends before it starts.")
        if last >= limit:
            raise CoreOutOfRange(raw, part, last)
        cores.extend(range(first, last + 1))
    if len(set(cores)) != len(cores):
        raise NeuronEnvironmentError(f"{name}={quote(raw)} lists a core more than once.")
    return cores


def parse_names(name: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """A comma-separated list of names, each one of `allowed` (empty when unset)."""
    raw = get(name)
    if raw is None:
        return ()
    names = tuple(part.strip() for part in raw.split(",") if part.strip())
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise NeuronEnvironmentError(
            f"{name}={quote(raw)} names {', '.join(map(repr, unknown))}, which is not a table here; "
            f"use a comma-separated list of {', '.join(allowed)}, or unset it.")
    return names
