"""Traced convolution layouts on neuron equal the eager ones (compiler/_fake_conv.py).

Eager neuron convolution runs the CPU kernel, so channels_last inputs give channels_last outputs. The fake
(traced) conv must predict the same strides, or Inductor's generated `assert_size_stride` fails on the real
output (diffusers' Sana under no_grad), or a compiled graph returns other strides than eager.
"""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

import torch_neuronx.compiler as compiler

CL2, CL3 = torch.channels_last, torch.channels_last_3d


def _randn(*shape, seed=0, memory_format=None):
    t = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    return t.contiguous(memory_format=memory_format) if memory_format is not None else t


# (name, input shape, weight shape, memory format, conv kwargs); weight of a transposed conv is (in, out/groups, ...)
CASES = [
    ("1d", (2, 4, 9), (6, 4, 3), None, dict(padding=1)),
    ("1d-groups", (2, 4, 9), (8, 2, 3), None, dict(groups=2)),
    ("2d-contiguous", (2, 4, 8, 8), (6, 4, 3, 3), None, dict(padding=1)),
    ("2d-channels-last", (2, 4, 8, 8), (6, 4, 3, 3), CL2, dict(padding=1)),
    ("2d-channels-last-1x1", (1, 4, 16, 16), (8, 4, 1, 1), CL2, {}),
    ("2d-depthwise-channels-last", (1, 8, 16, 16), (8, 1, 3, 3), CL2, dict(padding=1, groups=8)),
    ("2d-groups-channels-last-strided", (2, 8, 9, 9), (8, 4, 3, 3), CL2, dict(groups=2, stride=2)),
    ("2d-transposed-channels-last", (2, 4, 8, 8), (4, 6, 3, 3), CL2, dict(transposed=True, stride=2)),
    ("3d-contiguous", (1, 4, 4, 6, 6), (6, 4, 3, 3, 3), None, dict(padding=1)),
    ("3d-channels-last", (1, 4, 4, 6, 6), (6, 4, 3, 3, 3), CL3, dict(padding=1)),
]


def _conv_args(x, w, kwargs):
    nd = w.dim() - 2
    kw = dict(stride=[1] * nd, padding=[0] * nd, dilation=[1] * nd, transposed=False, output_padding=[0] * nd,
              groups=1)
    for k, v in kwargs.items():
        kw[k] = [v] * nd if k in ("stride", "padding") else v
    return (x, w, None, kw["stride"], kw["padding"], kw["dilation"], kw["transposed"], kw["output_padding"],
            kw["groups"])


@pytest.mark.parametrize("name,xs,ws,fmt,kwargs", CASES, ids=[c[0] for c in CASES])
def test_fake_conv_strides_equal_eager_neuron(name, xs, ws, fmt, kwargs):
    compiler.register()
    x, w = _randn(*xs, memory_format=fmt), _randn(*ws, seed=1)
    eager = torch.ops.aten.convolution(*_conv_args(x.to("neuron"), w.to("neuron"), kwargs))
    cpu = torch.ops.aten.convolution(*_conv_args(x, w, kwargs))
    assert eager.stride() == cpu.stride()            # eager neuron follows the CPU kernel's layout
    nx, nw = x.to("neuron"), w.to("neuron")
    with FakeTensorMode() as mode:
        fx, fw = mode.from_tensor(nx), mode.from_tensor(nw)
        fake = torch.ops.aten.convolution(*_conv_args(fx, fw, kwargs))
    assert fake.device == eager.device and fake.shape == eager.shape
    assert fake.stride() == eager.stride(), (name, fake.stride(), eager.stride())
    if fmt is CL2:  # the case the stock fake rule got wrong (CPU's 3-D kernels return contiguous)
        assert eager.is_contiguous(memory_format=CL2) and not eager.is_contiguous()


def test_fake_conv_backward_strides_equal_eager_neuron():
    compiler.register()
    x, w = _randn(2, 4, 8, 8, memory_format=CL2), _randn(6, 4, 3, 3, seed=1)
    args = _conv_args(x, w, dict(padding=1))[3:]
    go = _randn(2, 6, 8, 8, seed=2, memory_format=CL2)
    mask = [True, True, True]

    def backward(g, xx, ww):
        return torch.ops.aten.convolution_backward(g, xx, ww, [6], *args, mask)

    eager = backward(go.to("neuron"), x.to("neuron"), w.to("neuron"))
    for e, c in zip(eager, backward(go, x, w)):   # eager neuron is the CPU kernel on device memory
        assert e.stride() == c.stride()
        torch.testing.assert_close(e.cpu(), c)
    on_neuron = [t.to("neuron") for t in (go, x, w)]
    with FakeTensorMode() as mode:
        fake = backward(*(mode.from_tensor(t) for t in on_neuron))
    for e, f in zip(eager, fake):
        assert f.device == e.device and f.shape == e.shape and f.stride() == e.stride()
    assert eager[0].is_contiguous(memory_format=CL2)   # grad_input keeps channels_last


class _SanaLikeConv(torch.nn.Module):
    """Sana's GLUMBConv entry: tokens viewed as a channels_last image, 1x1 conv, depthwise 3x3 conv."""

    def __init__(self):
        super().__init__()
        self.inverted = torch.nn.Conv2d(4, 16, 1)
        self.depth = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)

    def forward(self, x):
        x = x.unflatten(1, (8, 8)).permute(0, 3, 1, 2)
        return self.depth(F.silu(self.inverted(x)))


class _UpConv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.ConvTranspose2d(4, 6, 2, stride=2)

    def forward(self, x):
        return torch.tanh(self.up(x))


@pytest.mark.parametrize("module,shape", [(_SanaLikeConv, (1, 64, 4)), (_UpConv, (1, 4, 8, 8))],
                         ids=["sana-glumbconv", "conv-transpose"])
def test_compiled_channels_last_conv_equals_cpu_no_grad(module, shape):
    torch.manual_seed(0)
    cpu_model = module()
    model = copy.deepcopy(cpu_model).to("neuron")
    x_cpu = _randn(*shape)
    if len(shape) == 4:
        x_cpu = x_cpu.contiguous(memory_format=CL2)
    x = x_cpu.to("neuron")
    with torch.no_grad():
        expected = cpu_model(x_cpu)
        eager = model(x)
        compiled = torch.compile(model, backend="neuron", fullgraph=True, dynamic=False)(x)
    assert eager.is_contiguous(memory_format=CL2) and eager.stride() == expected.stride()
    assert compiled.device == eager.device and compiled.stride() == eager.stride()
    torch.testing.assert_close(compiled.cpu(), expected, atol=1e-5, rtol=1e-5)
    assert compiler.get_dynamo_metrics()["graphs_compiled"] == 1


def test_compiled_channels_last_conv_training_step_equals_cpu():
    """With grad: forward and convolution_backward traced on neuron give the CPU's values and layouts."""
    torch.manual_seed(0)
    cpu_model = torch.nn.Conv2d(4, 6, 3, padding=1)
    model = copy.deepcopy(cpu_model).to("neuron")
    x_cpu = _randn(2, 4, 8, 8, memory_format=CL2)

    def step(fn, module, x):
        xx = x.detach().requires_grad_(True)
        out = fn(xx)
        out.square().sum().backward()
        grads = (xx.grad, module.weight.grad.clone(), module.bias.grad.clone())
        module.zero_grad(set_to_none=True)
        return out, grads

    cpu_out, cpu_grads = step(cpu_model, cpu_model, x_cpu)
    out, grads = step(torch.compile(model, backend="neuron", fullgraph=True, dynamic=False), model, x_cpu.to("neuron"))
    assert out.stride() == cpu_out.stride()
    torch.testing.assert_close(out.detach().cpu(), cpu_out.detach(), atol=1e-5, rtol=1e-5)
    for g, c in zip(grads, cpu_grads):
        assert g.stride() == c.stride()
        torch.testing.assert_close(g.cpu(), c, atol=1e-4, rtol=1e-4)
