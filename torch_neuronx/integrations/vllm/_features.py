"""The vLLM features the neuron platform refuses at start-up, each with the argument that asked for it.

vLLM's CPU kernels that neuron reuses cover dense decoder models; these features need kernels or
model-runner paths that do not run on the virtual NeuronCore, and would otherwise fail deep inside a
kernel after the model loaded.
"""
from __future__ import annotations


def _unsupported(vllm_config) -> list[str]:
    model = vllm_config.model_config
    found = []
    if vllm_config.lora_config is not None:
        found.append("LoRA (--enable-lora / enable_lora=True)")
    if vllm_config.speculative_config is not None:
        found.append("speculative decoding (--speculative-config / speculative_config=...)")
    if model is not None and model.quantization is not None:
        found.append(f"quantisation ({model.quantization!r}: --quantization, or the checkpoint's quantization_config)")
    if model is not None and model.is_multimodal_model:
        found.append(f"multimodal models ({model.architecture}: a text-only architecture is needed)")
    return found


def reject_unsupported(vllm_config) -> None:
    """Raise ValueError naming every unsupported feature this configuration asks for."""
    found = _unsupported(vllm_config)
    if found:
        raise ValueError(
            "vLLM on neuron does not support " + "; ".join(found)
            + ". Remove the option, or run vLLM's own CPU platform with VLLM_PLUGINS=none."
        )
