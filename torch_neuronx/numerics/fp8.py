"""fp8 E4M3 (docs/hardware-sources.md A5, high): Neuron's E4M3 is IEEE-style
FP8_EXP4 with range +-240, not the OCP e4m3fn +-448 of torch.float8_e4m3fn;
"Value outside +/-240 on Neuron devices, for E4M3 might result into NaNs".
Inside +-240 both formats hold the same values (same bias and mantissa), so
only out-of-range values differ. TORCH_NEURONX_NUMERICS_FP8_OVERFLOW=nan
(default, that sentence) or `saturate` (clamp to +-240).

The bound comes from the NKI simulator's trn2 dtype (nki.language.float8_e4m3,
ml_dtypes' IEEE E4M3), so the simulator and the torch side share one fact;
the simulator stores an overflow as inf, torch's e4m3fn has no inf.
"""
from __future__ import annotations

import ml_dtypes
import torch

from nki.language import float8_e4m3 as _NKI_TRN2_E4M3

from .. import runtime
from . import report

NEURON_E4M3_MAX = float(ml_dtypes.finfo(_NKI_TRN2_E4M3).max)  # 240.0
DTYPES = (torch.float8_e4m3fn,)


def target_has_neuron_e4m3() -> bool:
    """Whether the configured target's E4M3 is Neuron's +-240 one: trn1/trn2. Trn3 runs OCP
    float8_e4m3fn natively (docs/hardware-sources.md A5, NCC_EVRF051), so nothing differs there."""
    try:
        return not runtime.topology().chip.ocp_e4m3fn
    except runtime.env.NeuronEnvironmentError:
        return True   # the environment error is raised on the device's first use; assume trn2's E4M3


def _overflow(t: torch.Tensor):
    f = t.to(torch.float32)
    return f, f.abs() > NEURON_E4M3_MAX  # NaN compares False: already NaN stays NaN


def check(op: str, tensors) -> None:
    for t in tensors:
        if t.dtype in DTYPES and t.numel():
            f, bad = _overflow(t)
            if bool(bad.any()):
                report.record("fp8", op, f[bad].abs().max().item(), f"{t.dtype} {tuple(t.shape)}")
                return


def emulate(tensors, overflow: str) -> None:
    for t in tensors:
        if t.dtype in DTYPES and t.numel():
            f, bad = _overflow(t)
            if bool(bad.any()):
                if overflow == "nan":
                    fixed = f.masked_fill(bad, float("nan"))
                else:
                    fixed = f.clamp(-NEURON_E4M3_MAX, NEURON_E4M3_MAX)
                t.copy_(fixed)
