"""torch_neuronx.host_info(): the host CPU the virtual NeuronCore runs its kernels on, and what it chose for it."""
from __future__ import annotations

import platform


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def host_info() -> dict:
    """The host CPU, PyTorch's CPU capability, and how bf16/fp16 matmuls run on it.

    ``low_precision_gemm`` says, per dtype, ``"fp32"`` (operands converted once,
    fp32 accumulation, one rounding) or ``"native"`` (the CPU's own kernel), with
    the mode of TORCH_NEURONX_HOST_LOW_PRECISION_GEMM and where it came from.
    Raises the runtime's environment error when a variable is invalid."""
    import torch

    from . import host_gemm, topology

    topology()   # an invalid environment raises here, naming the variable
    policy = host_gemm.policy()
    return {
        "cpu": _cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "native_bf16_gemm": policy.native_bf16,
        "native_fp16_gemm": policy.native_fp16,
        "low_precision_gemm": {
            "mode": policy.mode,
            "source": policy.source,
            "bfloat16": "fp32" if policy.fp32_bf16 else "native",
            "float16": "fp32" if policy.fp32_fp16 else "native",
        },
    }
