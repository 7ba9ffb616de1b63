"""vLLM on the neuron device: a platform plugin registered in vLLM's `vllm.platform_plugins` entry-point group.

With the `vllm` extra installed in its own environment (docs/serving.md), `LLM(model)` and `vllm serve MODEL`
run on `neuron` with no flag: vLLM asks every plugin of the group whether its platform is present, and
`register()` answers with `NeuronPlatform` whenever the neuron device is (it is wherever torch_neuronx
imports). `VLLM_PLUGINS=<names>` limits the plugins vLLM loads, so `VLLM_PLUGINS=none` gives vLLM's own CPU
platform back.

Nothing outside this package imports it: vLLM is not installed in the project's main environment.
"""
from __future__ import annotations

__all__ = ["register"]

PLATFORM = "torch_neuronx.integrations.vllm.platform.NeuronPlatform"


def register() -> str | None:
    """vLLM's platform-plugin hook: the platform class's qualified name, or None when no NeuronCore is visible."""
    import torch

    neuron = getattr(torch, "neuron", None)
    if neuron is None or not neuron.is_available():
        return None
    return PLATFORM
