"""`Accelerator(mixed_precision="fp16")` on neuron: fp16 autocast with a gradient scaler, as on CUDA.

accelerate 1.15 turns native fp16 AMP on only for a fixed tuple of device types (`Accelerator.__init__`,
accelerator.py:565-584: xpu, cuda, npu, xla, mlu, musa, hpu, sdaa, mps) and raises
"fp16 mixed precision requires a device in (...) (not 'neuron')" for any other; its `get_grad_scaler`
(utils/modeling.py:2120) has no neuron branch either (it would fall through to a CUDA scaler). The neuron
device has fp16 autocast (`torch.autocast("neuron", torch.float16)`) and `torch.amp.GradScaler("neuron")`, so
`accelerate test`, `--mixed_precision fp16` and transformers' `--fp16` stop only at that table.

The adapter runs the library's `Accelerator.__init__` with that one block turned off: while it runs on this
thread for a neuron device, `AcceleratorState.mixed_precision` reads "no" (the state keeps "fp16": FSDP
plugins are set up from it, and afterwards `accelerator.mixed_precision`, `autocast()` and `prepare` see fp16).
Then it does what the block does for the listed devices: `native_amp = True` and a scaler built from the
`GradScalerKwargs` handler (FSDP: `ShardedGradScaler(device="neuron")`, else `torch.amp.GradScaler("neuron")`).
Other devices and DeepSpeed/Megatron-LM (which handle precision themselves) are untouched.
"""
from __future__ import annotations

import threading

from .._wrap import wrap_once

_DEVICE = "neuron"
_local = threading.local()  # .hiding: inside a wrapped Accelerator.__init__; .hidden: fp16 was hidden there


class _MixedPrecision(property):
    """`AcceleratorState.mixed_precision`, reading "no" for neuron fp16 while `Accelerator.__init__` runs."""


def _own_precision(state) -> bool:
    from accelerate.utils import DistributedType

    return state.distributed_type in (DistributedType.DEEPSPEED, DistributedType.MEGATRON_LM)


def _hiding_getter(original_get):
    def mixed_precision(state):
        value = original_get(state)
        if (value == "fp16" and getattr(_local, "hiding", False) and state.device.type == _DEVICE
                and not _own_precision(state)):
            _local.hidden = True
            return "no"
        return value

    return mixed_precision


def _scaler(accelerator, kwargs: dict):
    import torch
    from accelerate.utils import DistributedType

    if accelerator.distributed_type == DistributedType.FSDP and not accelerator.is_fsdp2:
        from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

        return ShardedGradScaler(device=_DEVICE, **kwargs)
    return torch.amp.GradScaler(_DEVICE, **kwargs)


def patch(module) -> None:
    """Wrap `accelerate.accelerator.Accelerator.__init__` and `AcceleratorState.mixed_precision`."""
    state_cls = module.AcceleratorState
    current = state_cls.__dict__["mixed_precision"]
    if not isinstance(current, _MixedPrecision):
        state_cls.mixed_precision = _MixedPrecision(_hiding_getter(current.fget), current.fset, current.fdel,
                                                    current.__doc__)

    def make(original):
        def __init__(self, *args, **kwargs):
            outer = getattr(_local, "hiding", False)
            _local.hiding, _local.hidden = True, False
            try:
                original(self, *args, **kwargs)
                hidden = _local.hidden
            finally:
                _local.hiding, _local.hidden = outer, False
            if hidden:
                self.native_amp = True
                handler = self.scaler_handler
                self.scaler = _scaler(self, handler.to_kwargs() if handler is not None else {})

        return __init__

    wrap_once(module.Accelerator, "__init__", make)
