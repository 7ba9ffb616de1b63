"""Say why `generate()` will not compile the decode step on neuron.

transformers compiles the decode step automatically on neuron when the cache is compileable (a static
cache); otherwise, if the user asked for compilation (`compile_config=...`), it only logs "unable to meet
the criteria for compilation". This adapter keeps transformers' decision and, on a neuron model, warns
with the reason and the fix.
"""
from __future__ import annotations

import warnings

from .._wrap import wrap_once

DYNAMIC_CACHE_MESSAGE = (
    "generate() will not compile the decode step on neuron: the KV cache is a dynamic cache ({cache}), "
    "whose key/value tensors grow by one position every step, so each step would have a new shape and "
    "neuron graphs are static (one compiled graph per shape). Pass cache_implementation='static' (with "
    "max_cache_len, or rely on max_new_tokens) to compile the decode step with backend 'neuron'; the "
    "decode now runs eagerly."
)
OFFLOAD_MESSAGE = (
    "generate() will not compile the decode step on neuron: the model is split across {devices} "
    "(device_map with CPU or disk offload); compiled graphs need every weight on the NeuronCore. The decode "
    "now runs eagerly."
)


def _reason(model, model_kwargs, generation_config) -> str | None:
    cache = model_kwargs.get("past_key_values", model_kwargs.get("cache_params"))
    device_map = getattr(model, "hf_device_map", None)
    if device_map:
        devices = {str(d) for d in device_map.values()}
        if "disk" in devices or ("cpu" in devices and len(devices) > 1):
            return OFFLOAD_MESSAGE.format(devices=", ".join(sorted(devices)))
    if cache is None:
        return DYNAMIC_CACHE_MESSAGE.format(cache="no cache object")
    inner = getattr(cache, "self_attention_cache", cache)
    if type(inner).__name__ == "DynamicCache" or not getattr(cache, "is_compileable", False):
        return DYNAMIC_CACHE_MESSAGE.format(cache=type(inner).__name__)
    return None


def patch(module) -> None:
    """Wrap `GenerationMixin._valid_auto_compile_criteria` of `transformers.generation.utils`."""
    def make(original):
        def _valid_auto_compile_criteria(self, model_kwargs, generation_config):
            decision = original(self, model_kwargs, generation_config)
            if (not decision and getattr(self, "device", None) is not None and self.device.type == "neuron"
                    and generation_config.compile_config is not None and not generation_config.disable_compile):
                reason = _reason(self, model_kwargs, generation_config)
                if reason is not None:
                    warnings.warn(reason, UserWarning, stacklevel=3)
            return decision

        return _valid_auto_compile_criteria

    wrap_once(module.GenerationMixin, "_valid_auto_compile_criteria", make)
