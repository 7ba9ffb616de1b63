"""`accelerator.prepare(model, optimizer, ...)` on neuron: the optimizer must follow the model's parameters.

The accelerate idiom builds the optimizer on the CPU model and lets `prepare` move the model to the device.
That relies on `module.to(device)` keeping each `Parameter` object and swapping its data in place, which
PyTorch only does when `TensorImpl::has_compatible_shallow_copy_type` holds: its list of dense backends is
CPU/CUDA/MPS/HIP/XPU/HPU/MTIA, without PrivateUse1. So `model.to("neuron")` puts new `Parameter` objects
in the module, and the optimizer keeps stepping (and zeroing) the old CPU ones: training silently does
nothing. accelerate repairs exactly this for XLA (`Accelerator.prepare`, `tpu_should_fix_optimizer`: map
old parameters to new by name, then `AcceleratedOptimizer._switch_parameters`); this adapter does the same
when the accelerator's device is neuron, and also carries any optimizer state the old parameters had.
Other devices, DeepSpeed, Megatron-LM and FSDP2 (which remaps itself) are untouched.
"""
from __future__ import annotations

from .._wrap import wrap_once


def _needs_remap(accelerator) -> bool:
    from accelerate.utils import DistributedType

    if accelerator.device.type != "neuron" or getattr(accelerator, "is_fsdp2", False):
        return False
    return accelerator.distributed_type not in (DistributedType.XLA, DistributedType.DEEPSPEED,
                                                DistributedType.MEGATRON_LM)


def _switch_optimizer_parameters(optimizer, mapping: dict) -> None:
    optimizer._switch_parameters(mapping)  # param_groups now hold the device parameters
    inner = getattr(optimizer, "optimizer", optimizer)
    for old, new in mapping.items():  # state (e.g. loaded before prepare) is keyed by parameter object
        if old in inner.state:
            inner.state[new] = inner.state.pop(old)


def patch(module) -> None:
    """Wrap `accelerate.accelerator.Accelerator.prepare`."""
    wrap_once(module.Accelerator, "prepare", _remapping_prepare)


def _remapping_prepare(original):
    def prepare(self, *args, device_placement=None):
        if not _needs_remap(self):
            return original(self, *args, device_placement=device_placement)
        old = self._get_named_parameters(*args, drop_refs=False)
        result = original(self, *args, device_placement=device_placement)
        results = result if isinstance(result, tuple) else (result,)
        if old:
            new = self._get_named_parameters(*results, drop_refs=False)
            mapping = {p: new[n] for n, p in old.items() if n in new and new[n] is not p}
            if mapping:
                for obj in results:
                    if hasattr(obj, "_switch_parameters"):
                        _switch_optimizer_parameters(obj, mapping)
        return result

    return prepare
