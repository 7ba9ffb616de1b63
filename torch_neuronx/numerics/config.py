"""The numerics settings, read once at startup from the environment.

TORCH_NEURONX_NUMERICS selects how the virtual core treats the places where
Trainium computes differently from the CPU kernels (docs/hardware-sources.md A):

* ``host`` (default): the CPU kernels' results, nothing installed, no cost.
* ``check``: results unchanged; each op whose result would differ on Trainium
  is recorded (op, Python line, worst value) and reported at exit.
* ``trainium``: results computed as Trainium computes them.

Every behaviour the facts file marks unverified is a named setting here, so a
user can pick the other reading; docs/numerics.md lists them.
"""
from __future__ import annotations

import dataclasses
import os

from ..runtime.env import NeuronEnvironmentError

MODE = "TORCH_NEURONX_NUMERICS"
INT64 = "TORCH_NEURONX_NUMERICS_INT64"
FLOAT64 = "TORCH_NEURONX_NUMERICS_FLOAT64"
FP8_OVERFLOW = "TORCH_NEURONX_NUMERICS_FP8_OVERFLOW"
REPORT = "TORCH_NEURONX_NUMERICS_REPORT"
SR_ENABLE = "NEURON_RT_STOCHASTIC_ROUNDING_EN"  # the Neuron runtime's own names (docs/hardware-sources.md A3, high)
SR_SEED = "NEURON_RT_STOCHASTIC_ROUNDING_SEED"

MODES = ("host", "check", "trainium")
# A1 [high]: neuronx-cc --native-int64 default downcasts int64 to int32. How an
# out-of-range value is downcast is unverified: "wrap" (keep the low 32 bits,
# two's complement) is our assumption; "native" is trn2 with --native-int64=enabled.
INT64_CHOICES = ("wrap", "native")
# A1 [unverified for the native backend]: "float32" follows the XLA path's
# F64->F32 (pytorch/xla dtype.cpp, high); "raise" treats float64 as unsupported.
FLOAT64_CHOICES = ("float32", "raise")
# A5 [high that the docs say "might result into NaNs"]: Neuron E4M3 is +-240.
# "nan" follows that sentence; "saturate" clamps to +-240. (IEEE FP8_EXP4 overflow
# is inf, which the NKI simulator's float8_e4m3 stores; torch's e4m3fn has no inf.)
FP8_OVERFLOW_CHOICES = ("nan", "saturate")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclasses.dataclass(frozen=True)
class NumericsConfig:
    mode: str = "host"
    int64: str = "wrap"
    float64: str = "float32"
    fp8_overflow: str = "nan"
    stochastic_rounding: bool = False
    stochastic_rounding_seed: int = 0
    report_at_exit: bool = True

    def key_fields(self) -> tuple:
        """What changes a compiled program's results (part of the compile cache key)."""
        if self.mode == "host":
            return ("numerics", "host")
        return ("numerics", self.mode, self.int64, self.float64, self.fp8_overflow,
                self.stochastic_rounding, self.stochastic_rounding_seed)


def _choice(name: str, choices: tuple, default: str) -> str:
    raw = os.environ.get(name, "").strip()
    if raw == "":
        return default
    value = raw.lower()
    if value not in choices:
        raise NeuronEnvironmentError(
            f"{name}={raw!r} is not valid; use one of {', '.join(choices)} (default {default}) or unset it.")
    return value


def _flag(name: str, default: bool) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise NeuronEnvironmentError(f"{name}={raw!r} is not a boolean; use 1/true or 0/false, or unset it.")


def _seed(name: str) -> int:
    raw = os.environ.get(name, "").strip()
    if raw == "":
        return 0
    try:
        value = int(raw, 0)
    except ValueError:
        raise NeuronEnvironmentError(f"{name}={raw!r} is not an integer seed; use e.g. 0 or 1234.") from None
    if not 0 <= value < 2**63:
        raise NeuronEnvironmentError(f"{name}={raw!r} must be between 0 and 2**63-1.")
    return value


def from_environment() -> NumericsConfig:
    """Parse and validate every numerics variable; errors name the variable."""
    return NumericsConfig(
        mode=_choice(MODE, MODES, "host"),
        int64=_choice(INT64, INT64_CHOICES, "wrap"),
        float64=_choice(FLOAT64, FLOAT64_CHOICES, "float32"),
        fp8_overflow=_choice(FP8_OVERFLOW, FP8_OVERFLOW_CHOICES, "nan"),
        stochastic_rounding=_flag(SR_ENABLE, False),
        stochastic_rounding_seed=_seed(SR_SEED),
        report_at_exit=_flag(REPORT, True),
    )
