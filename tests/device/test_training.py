"""Training basics on neuron: autograd, optimizers, checkpointing, GradScaler."""
import pytest
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


def make_pair(seed=0):
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 4))
    twin = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 4))
    twin.load_state_dict(net.state_dict())
    return net, twin.neuron()


@pytest.mark.parametrize("opt_cls,kwargs", [
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
    (torch.optim.Adam, dict(lr=1e-2, foreach=False)),
    (torch.optim.Adam, dict(lr=1e-2, foreach=True)),
    (torch.optim.AdamW, dict(lr=1e-2, foreach=True)),
    (torch.optim.AdamW, dict(lr=1e-2, fused=True)),
    (torch.optim.Adam, dict(lr=1e-2, fused=True)),
])
def test_optimizers_match_cpu(opt_cls, kwargs):
    net, twin = make_pair()
    opt, opt_n = opt_cls(net.parameters(), **kwargs), opt_cls(twin.parameters(), **kwargs)
    x, y = torch.randn(16, 8), torch.randn(16, 4)
    for _ in range(3):
        for model, o, dev in ((net, opt, "cpu"), (twin, opt_n, "neuron")):
            o.zero_grad()
            nn.functional.mse_loss(model(x.to(dev)), y.to(dev)).backward()
            o.step()
    for p, q in zip(net.parameters(), twin.parameters()):
        assert torch.equal(p, q.cpu())
    cpu_state, state = opt.state_dict()["state"], opt_n.state_dict()["state"]
    assert sorted(state) == sorted(cpu_state) == list(range(4))  # every parameter has state
    for index, entries in state.items():
        assert sorted(entries) == sorted(cpu_state[index]), entries.keys()
        assert "momentum_buffer" in entries if opt_cls is torch.optim.SGD else "exp_avg" in entries
        for name, value in entries.items():
            # "step" is a host scalar unless the optimizer is fused, as PyTorch does it on CUDA
            expected = "cpu" if name == "step" and not kwargs.get("fused") else "neuron"
            assert value.device.type == expected, (index, name, value.device)
            assert torch.equal(value.cpu(), cpu_state[index][name]), (index, name)


@pytest.mark.parametrize("reentrant", [True, False])
def test_checkpoint_preserves_rng(reentrant):
    torch.manual_seed(0)
    layer = nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.5), nn.Linear(16, 16)).neuron()
    x = torch.randn(4, 16, device="neuron", requires_grad=True)
    torch.manual_seed(1)
    checkpoint(layer, x, use_reentrant=reentrant).sum().backward()
    g_ckpt = x.grad.clone()
    x.grad = None
    torch.manual_seed(1)
    layer(x).sum().backward()
    assert torch.equal(g_ckpt.cpu(), x.grad.cpu())


def test_grad_scaler():
    net, twin = make_pair()
    scaler = torch.amp.GradScaler("neuron", init_scale=2.0**8)
    opt = torch.optim.SGD(twin.parameters(), lr=0.1)
    x, y = torch.randn(4, 8, device="neuron"), torch.randn(4, 4, device="neuron")
    with torch.autocast("neuron", dtype=torch.float16):
        loss = nn.functional.mse_loss(twin(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0**8
    # an inf gradient skips the step and halves the scale
    before = [p.detach().clone() for p in twin.parameters()]
    twin[0].weight.grad = torch.full_like(twin[0].weight, float("inf"))
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 2.0**7
    assert all(torch.equal(a, b) for a, b in zip(before, twin.parameters()))


def test_autograd_functions_and_double_backward():
    x = torch.randn(5, device="neuron", requires_grad=True)
    y = (x.sin() * x).sum()
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    (gg,) = torch.autograd.grad(g.sum(), x)
    xc = x.detach().cpu().requires_grad_()
    (gc,) = torch.autograd.grad((xc.sin() * xc).sum(), xc, create_graph=True)
    (ggc,) = torch.autograd.grad(gc.sum(), xc)
    assert torch.equal(gg.cpu(), ggc) and gg.is_neuron
