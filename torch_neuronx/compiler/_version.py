"""The version of the neuron compiler backend, as it enters every cache key.

It hashes the package version, the compiler's own Python sources and the C++
core (`torch_neuronx/_C*.so`): editing the backend or rebuilding the extension
changes it, so a cache never serves a program built by an older backend.
"""
from __future__ import annotations

import functools
import glob
import hashlib
import os

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def backend_files() -> list[str]:
    compiler_dir = os.path.join(_PACKAGE_DIR, "compiler")
    files = sorted(glob.glob(os.path.join(compiler_dir, "*.py")))
    files += sorted(glob.glob(os.path.join(_PACKAGE_DIR, "_C*.so")))
    return files


@functools.cache
def backend_version() -> str:
    """sha256 over the package version, compiler sources and the C++ core."""
    from .._version import __version__

    digest = hashlib.sha256(f"torch_neuronx {__version__}\n".encode())
    for path in backend_files():
        digest.update(os.path.basename(path).encode())
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def torch_version() -> str:
    import torch

    return torch.__version__
