"""The environment variables of a dry run, parsed and validated here (and only here).

TORCH_NEURONX_DRY_RUN=1            phantom device memory and shape-only ops for the whole process
                                   (read once at startup; `torch_neuronx.plan.enable()` sets it
                                   before the first neuron allocation).
TORCH_NEURONX_DRY_RUN_REPORT=PATH  where the JSON report goes at exit (else the markdown is printed
                                   to stderr).
TORCH_NEURONX_DRY_RUN_TRACE=PATH   an estimated device timeline (Chrome/Perfetto trace) at exit.
TORCH_NEURONX_DRY_RUN_LARGE_BYTES  an op touching a storage of at least this size (or producing
                                   one) computes only shapes; smaller ops run for real on their
                                   (placeholder) values. Default 1 MiB: the caching allocator's
                                   small-pool limit, so phantom tensors never share a segment with
                                   tensors that real ops write.
TORCH_NEURONX_DRY_RUN_MAX_SYNCS_PER_SITE  reads of device values at one source line before the
                                   dry run stops, as a loop that waits on a value will not end on
                                   placeholders (default 1000000).
"""
from __future__ import annotations

from ..runtime import env

DRY_RUN = "TORCH_NEURONX_DRY_RUN"
REPORT = "TORCH_NEURONX_DRY_RUN_REPORT"
TRACE = "TORCH_NEURONX_DRY_RUN_TRACE"
LARGE_BYTES = "TORCH_NEURONX_DRY_RUN_LARGE_BYTES"
MAX_SYNCS_PER_SITE = "TORCH_NEURONX_DRY_RUN_MAX_SYNCS_PER_SITE"

DEFAULT_LARGE_BYTES = 1 << 20
DEFAULT_MAX_SYNCS_PER_SITE = 1_000_000


def requested() -> bool:
    """TORCH_NEURONX_DRY_RUN is "1" (on) or unset/"0" (off); anything else is an error."""
    raw = env.get(DRY_RUN)
    if raw is None or raw == "0":
        return False
    if raw == "1":
        return True
    raise env.NeuronEnvironmentError(f"{DRY_RUN}={env.quote(raw)} must be 1 (dry run) or 0/unset (real run).")


def requested_or_off() -> bool:
    """As requested(), but False for a bad value: registration must not fail (plan.install warns)."""
    try:
        return requested()
    except env.NeuronEnvironmentError:
        return False


def large_bytes() -> int:
    if env.get(LARGE_BYTES) == "0":
        return 0              # every op shape-only (the exactness tests)
    value = env.parse_bytes(LARGE_BYTES)
    return DEFAULT_LARGE_BYTES if value is None else value


def max_syncs_per_site() -> int:
    value = env.parse_int(MAX_SYNCS_PER_SITE, minimum=1)
    return DEFAULT_MAX_SYNCS_PER_SITE if value is None else value


def report_path() -> str | None:
    return env.get(REPORT)


def trace_path() -> str | None:
    return env.get(TRACE)
