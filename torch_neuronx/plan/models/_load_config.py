"""Load a transformers config.json (a file or its folder) with a message that names the fix."""
from __future__ import annotations

import os


class ConfigError(ValueError):
    """A config transformers cannot build."""


def load_config(path: str):
    """AutoConfig from `path` (config.json or a folder holding one); never downloads."""
    from transformers import AutoConfig

    if os.path.isfile(path) and os.path.basename(path) != "config.json":
        # a config file of any name (llama.json): AutoConfig reads only <folder>/config.json
        return _from_file(path)
    folder = os.path.dirname(path) if os.path.isfile(path) else path
    if not os.path.isdir(folder) or not os.path.isfile(os.path.join(folder, "config.json")):
        raise ConfigError(f"--config {path!r}: no config file there; pass a transformers config file (any "
                          f"name, e.g. llama.json) or the folder holding its config.json (examples/configs/ "
                          f"has Llama-3.1 8B/70B/405B, Qwen3-8B and a 27B Qwen3-style config)")
    try:
        return AutoConfig.from_pretrained(folder, local_files_only=True)
    except (ValueError, KeyError, OSError, TypeError) as err:
        raise ConfigError(f"--config {path!r}: transformers cannot build this config ({err}); check its "
                          f"model_type and fields against transformers' config class for the model") from None


def _from_file(path: str):
    import json

    from transformers import AutoConfig

    try:
        with open(path) as f:
            data = json.load(f)
        model_type = data.pop("model_type")
        return AutoConfig.for_model(model_type, **data)
    except (ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"--config {path!r}: transformers cannot build this config ({err!r}); it needs a "
                          f"known model_type and that model's fields") from None


def causal_lm_class(config):
    """The AutoModelForCausalLM class for `config`, or a ConfigError naming the model type."""
    from transformers import AutoModelForCausalLM

    try:
        return AutoModelForCausalLM._model_mapping[type(config)]
    except KeyError:
        raise ConfigError(f"model_type {config.model_type!r} has no causal-LM class in transformers; the "
                          f"generate/train plans need a decoder (AutoModelForCausalLM)") from None
