"""torch's chunked `F.linear_cross_entropy` picks its accumulation per device type.

`LinearCrossEntropyOptions` resolves its "auto" settings per device type, and
`_resolve_auto_acc_dtype` answers fp32 accumulation for bf16/fp16 only on cuda
and cpu. Any other device falls back to accumulating in the input dtype, so bf16
losses on neuron would differ from CPU's. The "auto" policy/chunking pick is a
table keyed by (device type, dtype) in torch 2.13 (`_AUTO_DEFAULTS`) and a
function of the two from torch 2.14 on (`_auto_acc_policy`, "accurate" only for
cpu with bf16/fp16); neuron gets CPU's answer from either. Trainium's matmuls accumulate in fp32 (PSUM), and our
virtual core runs CPU's kernels, so neuron takes CPU's entries.
"""
from __future__ import annotations

import torch

from .._wrap import wrap_once

_DEVICE = "neuron"


def patch(module) -> None:
    if hasattr(module, "_AUTO_DEFAULTS"):   # torch 2.13
        for dtype in (torch.bfloat16, torch.float16):
            cpu_pick = module._AUTO_DEFAULTS.get(("cpu", dtype))
            if cpu_pick is not None:
                module._AUTO_DEFAULTS.setdefault((_DEVICE, dtype), cpu_pick)
    else:   # torch 2.14+: `_adjust` calls the module's `_auto_acc_policy(device_type, dtype)`
        def make_policy(original):
            def _auto_acc_policy(device_type, dtype):
                return original("cpu" if device_type == _DEVICE else device_type, dtype)

            return _auto_acc_policy

        wrap_once(module, "_auto_acc_policy", make_policy)

    def make(original):
        def _resolve_auto_acc_dtype(dtype, device):
            if device is not None and device.type == _DEVICE and dtype in (torch.float16, torch.bfloat16):
                return torch.float32
            return original(dtype, device)

        return _resolve_auto_acc_dtype

    wrap_once(module.LinearCrossEntropyOptions, "_resolve_auto_acc_dtype", make)
