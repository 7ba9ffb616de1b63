"""torch's chunked `F.linear_cross_entropy` picks its accumulation per device type.

`LinearCrossEntropyOptions` resolves its "auto" settings from a table keyed by
(device type, dtype) that lists only cuda and cpu, and `_resolve_auto_acc_dtype`
answers fp32 accumulation for bf16/fp16 only on those two. Any other device
falls back to accumulating in the input dtype, so bf16 losses on neuron would
differ from CPU's. Trainium's matmuls accumulate in fp32 (PSUM), and our
virtual core runs CPU's kernels, so neuron takes CPU's entries.
"""
from __future__ import annotations

import torch

from .._wrap import wrap_once

_DEVICE = "neuron"


def patch(module) -> None:
    for dtype in (torch.bfloat16, torch.float16):
        cpu_pick = module._AUTO_DEFAULTS.get(("cpu", dtype))
        if cpu_pick is not None:
            module._AUTO_DEFAULTS.setdefault((_DEVICE, dtype), cpu_pick)

    def make(original):
        def _resolve_auto_acc_dtype(dtype, device):
            if device is not None and device.type == _DEVICE and dtype in (torch.float16, torch.bfloat16):
                return torch.float32
            return original(dtype, device)

        return _resolve_auto_acc_dtype

    wrap_once(module.LinearCrossEntropyOptions, "_resolve_auto_acc_dtype", make)
