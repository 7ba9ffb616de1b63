"""How bf16 and fp16 matmuls run on the host CPU: TORCH_NEURONX_HOST_LOW_PRECISION_GEMM.

A CPU without a native bf16 (fp16) dot product runs PyTorch's bf16 (fp16) GEMM
as a scalar loop, tens of times slower than its fp32 GEMM. A NeuronCore's
TensorEngine takes bf16/fp16 inputs, accumulates in fp32 (PSUM) and rounds the
result once; the host can do the same at its fp32 GEMM speed: convert each
operand once, one fp32 GEMM, one rounding.

* ``auto`` (default): that fp32 path for a dtype the host has no native GEMM
  for; the CPU's own kernel (bitwise equal to CPU results) where it has one.
* ``native``: always the CPU's own kernel (CPU-bitwise results, slow on such hosts).
* ``fp32``: always the fp32 path (TensorEngine-style accumulation on every host).

TORCH_NEURONX_NUMERICS=trainium means ``fp32`` unless this variable is set.
The choice is made once, when the runtime starts (the matmul kernels in
csrc/kernels_matmul.cpp and compiled graphs' GEMMs read it).
"""
from __future__ import annotations

import contextlib
import dataclasses

from . import env

VARIABLE = env.HOST_LOW_PRECISION_GEMM
MODES = ("auto", "native", "fp32")
NUMERICS = "TORCH_NEURONX_NUMERICS"   # numerics/config.py parses it; only "trainium" matters here


@dataclasses.dataclass(frozen=True)
class Policy:
    mode: str                  # auto | native | fp32 (after TORCH_NEURONX_NUMERICS=trainium's default)
    source: str                # where the mode came from: the variable, the numerics mode, or the default
    native_bf16: bool          # the CPU's bf16 GEMM has a native kernel (oneDNN with bf16 support)
    native_fp16: bool
    fp32_bf16: bool            # bf16 matmuls accumulate in fp32 on the host
    fp32_fp16: bool

    def describe(self) -> str:
        def one(name, native, fp32):
            path = "fp32 accumulation" if fp32 else "CPU kernel"
            return f"{name}: {path} (host {'has' if native else 'has no'} native {name} GEMM)"
        return (f"{VARIABLE}={self.mode} ({self.source}); " + one("bf16", self.native_bf16, self.fp32_bf16)
                + "; " + one("fp16", self.native_fp16, self.fp32_fp16))


def parse_mode() -> tuple[str, str]:
    """(mode, source); an invalid value raises NeuronEnvironmentError naming the variable."""
    raw = env.get(VARIABLE)
    if raw is not None:
        value = raw.lower()
        if value not in MODES:
            raise env.NeuronEnvironmentError(
                f"{VARIABLE}={env.quote(raw)} is not valid; use one of {', '.join(MODES)} (default auto: fp32 "
                "accumulation where the host CPU has no native bf16/fp16 GEMM) or unset it.")
        return value, VARIABLE
    if (env.get(NUMERICS) or "").lower() == "trainium":
        return "fp32", f"{NUMERICS}=trainium"
    return "auto", "default"


def native_support() -> tuple[bool, bool]:
    """(bf16, fp16): whether PyTorch's CPU GEMM for the dtype runs a native kernel here.

    PyTorch's CPU bf16/fp16 GEMM uses oneDNN when oneDNN reports support for the
    dtype on this CPU (which honours ONEDNN_MAX_CPU_ISA) and mkldnn is enabled;
    otherwise it runs its scalar fallback. The same checks decide here."""
    import torch

    if not (torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled):
        return False, False
    ops = torch.ops.mkldnn
    return bool(ops._is_mkldnn_bf16_supported()), bool(ops._is_mkldnn_fp16_supported())


def decide(mode: str, source: str, native_bf16: bool, native_fp16: bool) -> Policy:
    if mode == "auto":
        fp32_bf16, fp32_fp16 = not native_bf16, not native_fp16
    else:
        fp32_bf16 = fp32_fp16 = mode == "fp32"
    return Policy(mode, source, native_bf16, native_fp16, fp32_bf16, fp32_fp16)


_policy: Policy | None = None


def configure(core) -> Policy:
    """Read the variable, detect the host and hand the choice to the C++ kernels."""
    global _policy
    mode, source = parse_mode()
    _policy = decide(mode, source, *native_support())
    core._set_low_precision_gemm_fp32(_policy.fp32_bf16, _policy.fp32_fp16)
    return _policy


def set_mode(mode: str) -> Policy:
    """Switch the policy in this process (auto, native or fp32), as the variable would at start;
    returns the policy it replaced. Graphs compiled after the switch follow it (the mode is part
    of their cache keys)."""
    if mode not in MODES:
        raise ValueError(f"set_mode(mode={mode!r}): use one of {', '.join(MODES)}")
    return restore(decide(mode, "set_mode", *native_support()))


def restore(previous: Policy) -> Policy:
    """Put back a policy set_mode or policy() returned; returns the one it replaced."""
    global _policy
    from .. import _C

    replaced, _policy = _policy, previous
    _C._set_low_precision_gemm_fp32(previous.fp32_bf16, previous.fp32_fp16)
    return replaced


@contextlib.contextmanager
def using(mode: str):
    """`with host_gemm.using("fp32"):` the policy `mode` inside the block, the previous one after."""
    previous = set_mode(mode)
    try:
        yield
    finally:
        restore(previous)


def policy() -> Policy | None:
    """The policy in force (None before the runtime started, or when its environment is invalid)."""
    return _policy


def fp32_dtypes() -> tuple:
    """The dtypes whose matmuls accumulate in fp32 on the host (for compiled graphs)."""
    import torch

    if _policy is None:
        return ()
    return tuple(dt for dt, on in ((torch.bfloat16, _policy.fp32_bf16), (torch.float16, _policy.fp32_fp16)) if on)
