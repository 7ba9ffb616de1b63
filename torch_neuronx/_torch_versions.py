"""Which torch releases each patch of torch internals was written for, and the check that says so.

The package patches a few private pieces of torch (Inductor's "cpu" comparisons, the fake conv rule,
the RNG higher-order ops, Inductor's vector-ISA probe, c10d's gloo-only `monitored_barrier`, Dynamo's
frame-skip API). Private APIs change between minor releases without notice, so every patch names
the minor versions it was checked against and calls `require(...)` before touching anything: on a
torch it does not know it raises, naming the patch and the version, instead of patching something
that may have changed meaning.

`TESTED` is the one list of torch minors the package is built and tested on (`.ci/version-matrix`
runs them); pyproject.toml's `torch>=...,<...` range and the README state the same range.
"""
from __future__ import annotations

import re

TESTED: tuple[str, ...] = ("2.13", "2.14", "2.15")


class UnsupportedTorchVersionError(RuntimeError):
    """A patch of torch internals met a torch minor version it was not written for."""


def minor(version: str | None = None) -> str:
    """'2.14' for '2.14.1+cu130', '2.15.0a0+git...' and the like (the running torch by default)."""
    if version is None:
        import torch

        version = torch.__version__
    match = re.match(r"(\d+)\.(\d+)", str(version))
    if match is None:
        raise UnsupportedTorchVersionError(f"torch-neuronx: cannot read a major.minor version from torch "
                                           f"version {version!r}")
    return f"{match.group(1)}.{match.group(2)}"


def require(patch: str, written_for: tuple[str, ...] = TESTED, version: str | None = None) -> str:
    """Raise unless the running torch's minor version is one `patch` was written for; return that minor.

    `patch` names the function doing the patching and what it patches, so the error tells the
    reader exactly which piece of torch-neuronx needs to be checked against the new torch.
    """
    import torch

    full = str(torch.__version__) if version is None else version
    current = minor(full)
    if current not in written_for:
        raise UnsupportedTorchVersionError(
            f"torch-neuronx: {patch} patches torch internals and was written for torch "
            f"{', '.join(written_for)}; this is torch {full}. Install a supported torch "
            f"({', '.join(TESTED)}), or check this patch against torch {current} and add it to its "
            f"list of versions.")
    return current
