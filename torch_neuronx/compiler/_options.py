"""Options of the neuron compiler: `torch.compile(..., mode=, options=)` and the
TORCH_NEURONX_* environment variables, parsed and validated in one place.

Variables are read at each compile (not at import), so a process can change
them between compiles. Errors name the variable and say what a valid value is.
"""
from __future__ import annotations

import os
import re
import tempfile
import warnings
from dataclasses import dataclass

from ..runtime.env import get as _get  # unset or blank -> None, else stripped

DISABLE_FALLBACK_EXECUTION = "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION"
NEFF_CACHE_DIR = "TORCH_NEURONX_NEFF_CACHE_DIR"
DISABLE_NEFF_CACHE = ("TORCH_NEURONX_DISABLE_NEFF_CACHE", "TORCH_NEURONX_NEFF_DISABLE_CACHE")
NEFF_CACHE_LOCK_TIMEOUT = "TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT"
CACHE_MAX_ENTRIES = "NEURON_COMPILATION_CACHE_MAX_ENTRIES"
DEBUG_DIR = "TORCH_NEURONX_DEBUG_DIR"
PRESERVE_ARTIFACTS = "TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS"
RECOMPILE_WARN_THRESHOLD = "TORCH_NEURONX_RECOMPILE_WARN_THRESHOLD"

KNOWN_OPTIONS = ("fallback_execution", "model_name")
SUPPORTED_MODES = (None, "default")

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class NeuronCompileOptionError(ValueError):
    """An option or environment variable of the neuron compiler is invalid."""


def env_bool(name: str, default: bool) -> bool:
    raw = _get(name)
    if raw is None:
        return default
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise NeuronCompileOptionError(f"{name}={raw!r} is not a boolean; use 1/0, true/false, yes/no or on/off.")


def env_int(name: str, default: int, minimum: int = 0) -> int:
    raw = _get(name)
    if raw is None:
        return default
    if not re.fullmatch(r"\d+", raw) or int(raw) < minimum:
        raise NeuronCompileOptionError(f"{name}={raw!r} must be a whole number >= {minimum}.")
    return int(raw)


def default_cache_dir() -> str:
    """Per-user default: $XDG_CACHE_HOME/torch_neuronx/neff_cache (~/.cache/...), never a shared folder."""
    base = _get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "torch_neuronx", "neff_cache")


def cache_dir() -> str:
    return os.path.abspath(os.path.expanduser(_get(NEFF_CACHE_DIR) or default_cache_dir()))


def cache_enabled() -> bool:
    return not any(env_bool(name, False) for name in DISABLE_NEFF_CACHE)


def debug_dir() -> str:
    # TorchNeuron's documented default: <tmp>/neuron_backend (artifacts are written only when
    # TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS=1)
    return os.path.abspath(_get(DEBUG_DIR) or os.path.join(tempfile.gettempdir(), "neuron_backend"))


def rank() -> int:
    for name in ("RANK", "LOCAL_RANK"):
        raw = _get(name)
        if raw is not None and raw.isdigit():
            return int(raw)
    return 0


_warned_modes: set = set()
_MODEL_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_default_model_name = ["model"]


def set_model_name(name: str) -> None:
    """Name the artifacts of later compiles (TorchNeuron's `set_model_name`); options['model_name'] wins."""
    if not isinstance(name, str) or not _MODEL_NAME.fullmatch(name):
        raise NeuronCompileOptionError(f"set_model_name(name) takes a name of letters, digits, '_', '.', '-'; "
                                       f"got {name!r}")
    _default_model_name[0] = name


def get_model_name() -> str:
    return _default_model_name[0]


get_rank = rank  # TorchNeuron's name: the rank that names artifact folders (proc_<rank>)


@dataclass(frozen=True)
class CompileOptions:
    fallback_execution: bool
    model_name: str
    cache: bool
    cache_dir: str
    lock_timeout: int
    memory_cache_entries: int
    preserve_artifacts: bool
    debug_dir: str
    recompile_warn_threshold: int

    def key_fields(self) -> tuple:
        """The options that change the program a compile produces."""
        # model_name only names artifacts; the host GEMM policy changes bf16/fp16 GEMMs (_low_precision_gemm.py)
        from ..runtime import host_gemm

        return (("low_precision_gemm_fp32", tuple(str(d) for d in host_gemm.fp32_dtypes())),)


def resolve(mode: str | None = None, options: dict | None = None) -> CompileOptions:
    """Merge torch.compile's mode/options with the environment; warn on what is ignored."""
    if mode not in SUPPORTED_MODES and mode not in _warned_modes:
        _warned_modes.add(mode)  # once per process, not once per graph (every graph resolves the options)
        warnings.warn(f"Neuron backend does not support mode={mode!r}, falling back to default mode",
                      UserWarning, stacklevel=3)
    options = dict(options or {})
    unknown = sorted(k for k in options if k not in KNOWN_OPTIONS)
    if unknown:
        warnings.warn(f"Neuron backend ignores unknown options {unknown}; it reads {list(KNOWN_OPTIONS)}",
                      UserWarning, stacklevel=3)
    # TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION defaults to True: a failed compile raises.
    fallback = not env_bool(DISABLE_FALLBACK_EXECUTION, True)
    if "fallback_execution" in options:
        value = options["fallback_execution"]
        if not isinstance(value, bool):
            raise NeuronCompileOptionError(f"options['fallback_execution'] must be a bool, got {value!r}")
        fallback = value
    model_name = options.get("model_name", _default_model_name[0])
    if not isinstance(model_name, str) or not _MODEL_NAME.fullmatch(model_name):
        raise NeuronCompileOptionError(f"options['model_name'] must be a name of letters, digits, '_', '.', '-'; got {model_name!r}")
    return CompileOptions(
        fallback_execution=fallback,
        model_name=model_name,
        cache=cache_enabled(),
        cache_dir=cache_dir(),
        lock_timeout=env_int(NEFF_CACHE_LOCK_TIMEOUT, 1200, minimum=1),
        memory_cache_entries=env_int(CACHE_MAX_ENTRIES, 512, minimum=0),
        preserve_artifacts=env_bool(PRESERVE_ARTIFACTS, False),
        debug_dir=debug_dir(),
        recompile_warn_threshold=env_int(RECOMPILE_WARN_THRESHOLD, 8, minimum=1),
    )
