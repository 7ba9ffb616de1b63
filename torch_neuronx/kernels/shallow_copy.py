"""`aten::_has_compatible_shallow_copy_type` for the neuron device.

`Module._apply` (so `module.to("neuron")`) asks this op whether a parameter's
TensorImpl may take the moved tensor's data in place (`param.data = moved`,
which keeps the Parameter object, its hooks and every optimizer that holds
it), or must be replaced by a new Parameter. `tensor.data = other` asks the
same question. ATen's default answer (`TensorImpl::has_compatible_shallow_copy_type`)
lists CPU, CUDA, XPU, MPS, HIP, HPU and MTIA only; PrivateUse1 backends are
expected to register this op for their key, which is what this file does.

The dispatcher picks the PrivateUse1 kernel whenever either tensor is on
neuron. The answer is the one CUDA gives for CPU<->CUDA: both tensors are
plain dense strided tensors of a host-or-neuron backend (no sparse, quantized,
nested or meta tensors; those still get a new object, as on CUDA).
"""
from __future__ import annotations

import torch

_SHALLOW_COPY_DEVICES = ("cpu", "neuron")


def _dense_strided(t: torch.Tensor) -> bool:
    return (t.layout == torch.strided and t.device.type in _SHALLOW_COPY_DEVICES
            and not t.is_quantized and not t.is_nested)


def has_compatible_shallow_copy_type(self: torch.Tensor, src: torch.Tensor) -> bool:
    return _dense_strided(self) and _dense_strided(src)


def register(lib: torch.library.Library) -> None:
    lib.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type, "PrivateUse1")
