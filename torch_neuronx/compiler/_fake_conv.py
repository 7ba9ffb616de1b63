"""Fake (traced) convolution strides on neuron equal the eager ones.

Eager convolution on neuron runs the CPU kernel on the same memory, so its
output layout is the CPU one: channels_last in, channels_last out (mkldnn or
the slow 2-d kernels, as ATen picks them for a CPU tensor). The FakeTensor conv
rule (`torch/_subclasses/fake_impls.py: conv`) picks the layout with
`torch._C._select_conv_backend`, which for a PrivateUse1 tensor answers
`Overrideable` and so always predicts contiguous. Inductor trusts the fake
layout, and the generated `assert_size_stride` then fails on the real
channels_last output (diffusers' Sana GLUMBConv under `no_grad`).

`install()` wraps torch's fake conv rule: for a neuron input, it runs the stock
rule on CPU twins of the fake tensors, so the CPU backend choice decides the
memory format, and returns the result on the neuron device. Other devices go
through the stock rule unchanged.
"""
from __future__ import annotations

import torch

from .._torch_versions import require

DEVICE = "neuron"
# The torch minors whose torch._subclasses.fake_impls conv rule this wrapper was checked against.
WRITTEN_FOR = ("2.13", "2.14", "2.15")

_installed = False


def _ops():
    aten = torch.ops.aten
    return (aten.convolution.default, aten._convolution.default, aten._convolution.deprecated,
            aten.convolution_backward.default)


def _retarget(fake_mode, tensor, device: torch.device):
    """A FakeTensor with `tensor`'s sizes, strides and storage offset on another fake device."""
    from torch._subclasses.fake_tensor import FakeTensor, in_kernel_invocation_manager

    with in_kernel_invocation_manager(fake_mode):
        meta = torch.ops.aten.alias.default(tensor)  # plain meta tensor, same geometry
    return FakeTensor(fake_mode, meta, device)


def _make_rule(stock_rule):
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.utils._pytree import tree_map_only

    def neuron_conv(fake_mode, func, *args, **kwargs):
        tensors = [t for t in (*args, *kwargs.values()) if isinstance(t, FakeTensor)]
        if not tensors or tensors[0].fake_device.type != DEVICE:
            return stock_rule(fake_mode, func, *args, **kwargs)
        device = tensors[0].fake_device
        cpu = torch.device("cpu")

        def to_cpu(t):
            return _retarget(fake_mode, t, cpu) if t.fake_device.type == DEVICE else t

        def to_neuron(t):
            return _retarget(fake_mode, t, device)

        args, kwargs = tree_map_only(FakeTensor, to_cpu, (args, kwargs))
        out = stock_rule(fake_mode, func, *args, **kwargs)
        return tree_map_only(FakeTensor, to_neuron, out)

    neuron_conv.__wrapped__ = stock_rule
    return neuron_conv


def install() -> None:
    """Idempotently route neuron convolutions through the CPU layout decision under fake tensors."""
    global _installed
    require("torch_neuronx.compiler._fake_conv.install (fake conv rule in torch._subclasses.fake_impls)", WRITTEN_FOR)
    if _installed:
        return
    from torch._subclasses import fake_impls
    from torch._subclasses.fake_tensor import FakeTensorMode

    for op in _ops():
        stock = fake_impls.op_implementations_dict[op]
        fake_impls.op_implementations_dict[op] = _make_rule(getattr(stock, "__wrapped__", stock))
    # The fake dispatch cache may hold conv results computed with the stock rule.
    FakeTensorMode.cache.clear()
    _installed = True
