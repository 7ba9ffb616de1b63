"""estimate() on eager neuron code: results unchanged, breakdowns by category / module / op,
fake and meta tensors give the same estimate, unmodelled ops say so once, no cost outside."""
import json
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_neuronx
from torch_neuronx.estimate import op_estimate, recorders

aten = torch.ops.aten


class Block(nn.Module):
    def __init__(self, d=32, h=2):
        super().__init__()
        self.h = h
        self.norm = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(self.norm(x)).view(B, T, 3, self.h, D // self.h).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, D))
        return x + self.mlp(self.norm(x))


def _step(model, x):
    y = model(x)
    y.square().mean().backward()
    return y


def test_results_unchanged_and_breakdowns():
    torch.manual_seed(0)
    model = Block().to("neuron")
    x = torch.randn(2, 8, 32, device="neuron")
    ref = _step(model, x).cpu()
    ref_grads = [p.grad.cpu().clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    with torch_neuronx.estimate() as est:
        y = _step(model, x)
    assert torch.equal(y.cpu(), ref)
    assert all(torch.equal(p.grad.cpu(), g) for p, g in zip(model.parameters(), ref_grads))
    cats = est.by_category()
    assert {"matmul", "attention", "elementwise", "launch"} <= set(cats)
    assert sum(cats.values()) == pytest.approx(est.total_s)
    mods = est.by_module()
    assert mods["Block.mlp"]["forward"] > 0 and mods["Block.mlp"]["backward"] > 0
    assert mods["Block"]["forward"] >= mods["Block.mlp"]["forward"]
    ops = est.by_op()
    assert ops["aten.addmm"]["flops"] > 0
    assert any("flash_attention" in name for name in ops)
    assert 0 < est.mfu < 1 and est.flops == sum(r["flops"] for r in ops.values())
    data = json.loads(est.to_json())
    assert data["total_s"] == pytest.approx(est.total_s) and data["hardware"]["instance"] == "trn2.3xlarge"
    text = est.summary()
    assert "trn2.3xlarge" in text and "Block.mlp" in text and "aten.addmm" in text
    assert recorders.active() == () and torch._C._len_torch_dispatch_stack() == 0


def test_instance_argument_and_autocast():
    model = nn.Linear(256, 256).to("neuron")
    x = torch.randn(64, 256, device="neuron")
    with torch_neuronx.estimate("trn2.3xlarge", lnc=1, assumptions={"eager_launch_s": 0}) as fp32:
        model(x)
    with torch_neuronx.estimate("trn2.3xlarge", lnc=1, assumptions={"eager_launch_s": 0}) as bf16:
        with torch.autocast("neuron", dtype=torch.bfloat16):
            model(x)
    mm32 = fp32.by_op()["aten.addmm"]["seconds"]
    mm16 = bf16.by_op()["aten.addmm"]["seconds"]
    assert mm16 < mm32
    with torch_neuronx.estimate("trn3.3xlarge") as t3:
        model(x)
    assert t3.hardware.chip.name == "trn3"


def test_fake_meta_and_real_tensors_agree():
    from torch._subclasses.fake_tensor import FakeTensorMode
    real = torch.randn(64, 128, device="neuron")
    e_real = op_estimate(aten.mm.default, (real, real.t()), {}, real @ real.t())
    meta = torch.empty(64, 128, device="meta")
    e_meta = op_estimate(aten.mm.default, (meta, meta.t()), {}, meta @ meta.t())
    with FakeTensorMode():
        f = torch.empty(64, 128)
        e_fake = op_estimate(aten.mm.default, (f, f.t()), {}, f @ f.t())
    assert e_real == e_meta == e_fake
    assert e_real.flops == 2 * 64 * 128 * 64 and e_real.category == "matmul"


def test_unmodelled_op_says_so_once_and_counts_as_vector():
    x = torch.randn(8, 4, device="neuron")   # _pdist_forward: a Core ATen op (on the device) with no model
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch_neuronx.estimate() as est:
            torch.ops.aten._pdist_forward(x, 2.0)
            torch.ops.aten._pdist_forward(x, 2.0)
    msgs = [str(w.message) for w in caught if "no cost model for aten._pdist_forward" in str(w.message)]
    assert len(msgs) == 1
    assert "aten._pdist_forward" in est.unmodelled and est.by_op()["aten._pdist_forward"]["count"] == 2
    assert "no cost model" in est.summary()


def test_views_are_free_and_off_costs_nothing():
    x = torch.randn(8, 8, device="neuron")
    with torch_neuronx.estimate() as est:
        x.t().transpose(0, 1).view(64)[2:10]
    assert est.events == [] and est.total_s == 0
    assert torch._C._len_torch_dispatch_stack() == 0


def test_estimation_errors_never_break_the_program(monkeypatch):
    from torch_neuronx.estimate import _mode as mode

    def broken(*args, **kwargs):
        raise ValueError("model bug")
    monkeypatch.setattr(mode, "op_estimate", broken)
    x = torch.randn(4, device="neuron")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch_neuronx.estimate() as est:
            y = x * 2
    assert torch.equal(y.cpu(), x.cpu() * 2) and "aten.mul" in est.unmodelled


def test_optimizer_foreach_ops_are_modelled_over_every_tensor():
    """AdamW's multi-tensor steps (_foreach_lerp_, _foreach_addcmul_, ...) are elementwise work over
    every tensor of their lists, not unmodelled ops."""
    params = [torch.randn(256, 256, device="neuron", requires_grad=True) for _ in range(3)]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(params, foreach=True)
    opt.step()
    with torch_neuronx.estimate() as est:
        opt.step()
    ops = est.by_op()
    assert not est.unmodelled, est.unmodelled
    lerp = ops["aten._foreach_lerp_"]
    assert lerp["bytes"] >= 3 * 2 * 4 * 256 * 256      # reads exp_avg and grads of three params
