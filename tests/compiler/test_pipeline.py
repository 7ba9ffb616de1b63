"""Dynamo -> AOTAutograd -> Inductor C++ for the virtual core: results and
gradients match neuron eager, outputs live on the inputs' neuron core."""
from __future__ import annotations

import pytest
import torch

import torch_neuronx
from tests.compiler.conftest import elementwise, neuron_randn


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))


def test_function_forward_matches_eager():
    x, y = neuron_randn(4, 8), neuron_randn(4, 8, seed=1)
    out = torch.compile(elementwise, backend="neuron")(x, y)
    assert out.device == torch.device("neuron", 0)
    torch.testing.assert_close(out, elementwise(x, y))
    m = torch_neuronx.compiler.get_dynamo_metrics()
    assert m["graphs_compiled"] == 1


def test_training_forward_and_gradients_match_eager():
    eager, model = _mlp().to("neuron"), _mlp().to("neuron")
    compiled = torch.compile(model, backend="neuron")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt_ref = torch.optim.SGD(eager.parameters(), lr=0.1)
    for step in range(2):  # optimizer steps stay eager; the second step reuses the graphs
        x = neuron_randn(8, 16, seed=step, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_(True)
        loss = compiled(x).square().mean()
        loss_ref = eager(x_ref).square().mean()
        loss.backward()
        loss_ref.backward()
        torch.testing.assert_close(loss, loss_ref)
        torch.testing.assert_close(x.grad, x_ref.grad)
        for p, q in zip(model.parameters(), eager.parameters()):
            assert p.grad.device.type == "neuron"
            torch.testing.assert_close(p.grad, q.grad)
        opt.step(); opt_ref.step(); opt.zero_grad(); opt_ref.zero_grad()
    assert torch_neuronx.compiler.get_dynamo_metrics()["recompilations"] == 0


def test_module_compile_method_and_no_grad():
    model = _mlp().to("neuron")
    expected = model(neuron_randn(8, 16))
    model.compile(backend="neuron")
    with torch.no_grad():
        out = model(neuron_randn(8, 16))
    torch.testing.assert_close(out, expected.detach())
    assert not out.requires_grad


def test_outputs_on_the_inputs_core():
    assert torch.neuron.device_count() == 4   # one trn2 chip at LNC=2, the default topology
    x, y = neuron_randn(4, 8).to("neuron:1"), neuron_randn(4, 8, seed=1).to("neuron:1")
    out = torch.compile(elementwise, backend="neuron")(x, y)
    assert out.device == torch.device("neuron", 1)
    torch.testing.assert_close(out.cpu(), elementwise(x.cpu(), y.cpu()))


def test_static_kv_cache_index_copy_updates_buffer_in_place():
    class Cache(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("k", torch.zeros(1, 6, 4))

        def forward(self, pos, new):
            self.k.index_copy_(1, pos, new)
            return self.k.sum(dim=1)

    eager, model = Cache().to("neuron"), Cache().to("neuron")
    compiled = torch.compile(model, backend="neuron", fullgraph=True)
    for step in range(3):
        pos = torch.tensor([step], device="neuron")
        new = neuron_randn(1, 1, 4, seed=step)
        torch.testing.assert_close(compiled(pos, new), eager(pos, new))
    torch.testing.assert_close(model.k, eager.k)
    assert model.k.device.type == "neuron"


def test_autocast_inside_compiled_region():
    w = neuron_randn(8, 8, seed=3)

    def f(x):
        with torch.autocast("neuron", dtype=torch.bfloat16):
            return torch.relu(x @ w)

    x = neuron_randn(4, 8)
    out = torch.compile(f, backend="neuron")(x)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, f(x))


def test_mixes_neuron_tensors_with_cpu_scalars():
    def f(x, scale):
        return x * scale + 1

    x, scale = neuron_randn(4, 8), torch.tensor(2.5)
    out = torch.compile(f, backend="neuron")(x, scale)
    assert out.device.type == "neuron"
    torch.testing.assert_close(out, f(x, scale))


def test_random_ops_reproducible_under_same_seed():
    def f(x):
        return torch.nn.functional.dropout(x, p=0.5, training=True) + torch.rand_like(x)

    compiled = torch.compile(f, backend="neuron")
    x = neuron_randn(16, 16)
    torch.manual_seed(123)
    a = compiled(x)
    torch.manual_seed(123)
    b = compiled(x)
    torch.manual_seed(7)
    c = compiled(x)
    assert a.device.type == "neuron"
    torch.testing.assert_close(a, b)
    assert not torch.equal(a, c)
