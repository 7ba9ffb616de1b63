"""`module.to("neuron")` keeps its Parameter objects, as on CUDA.

PyTorch moves parameters in place (`param.data = moved`) only when the
dispatched op `aten::_has_compatible_shallow_copy_type` says the two tensors'
impls are compatible; torch_neuronx/kernels/shallow_copy.py answers it for
the neuron key. Without it every move made new Parameters and an optimizer
built before the move silently stepped the stale CPU tensors (the old failure
mode, kept as `test_optimizer_built_before_move_trains`).
"""
import pytest
import torch


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def test_compatible_shallow_copy_type_for_neuron():
    cpu, dev = torch.ones(2), torch.ones(2, device="neuron")
    assert torch._has_compatible_shallow_copy_type(cpu, dev)
    assert torch._has_compatible_shallow_copy_type(dev, cpu)
    assert torch._has_compatible_shallow_copy_type(dev, torch.ones(2, device="neuron:1"))
    # Like CUDA: meta and sparse tensors still get new objects.
    assert not torch._has_compatible_shallow_copy_type(dev, torch.ones(2, device="meta"))
    assert not torch._has_compatible_shallow_copy_type(cpu.to_sparse(), dev)


def test_module_to_keeps_parameter_and_grad_objects():
    model = _mlp()
    model(torch.randn(3, 4)).sum().backward()
    params = list(model.parameters())
    grads = [p.grad for p in params]
    model.to("neuron")
    assert all(a is b for a, b in zip(model.parameters(), params))
    assert all(p.grad is g for p, g in zip(params, grads))
    assert all(p.device.type == "neuron" and p.grad.device.type == "neuron" for p in params)
    model.to("cpu")
    assert all(a is b for a, b in zip(model.parameters(), params))
    assert all(p.device.type == "cpu" for p in params)


def test_optimizer_built_before_move_trains():
    x, y = torch.randn(6, 4), torch.randn(6, 2)
    ref = _mlp()
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=0.1)
    model = _mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)  # built on the CPU model
    model.to("neuron")
    xd, yd = x.to("neuron"), y.to("neuron")
    before = [p.detach().cpu().clone() for p in model.parameters()]
    for _ in range(3):
        for m, o, a, b in ((ref, ref_opt, x, y), (model, opt, xd, yd)):
            o.zero_grad()
            torch.nn.functional.mse_loss(m(a), b).backward()
            o.step()
    assert all(not torch.equal(b, p.detach().cpu()) for b, p in zip(before, model.parameters()))
    for p, r in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu(), r.detach(), rtol=1e-5, atol=1e-6)
    assert all(s["exp_avg"].device.type == "neuron" for s in opt.state.values())


def test_overwrite_on_conversion_still_replaces():
    model = torch.nn.Linear(2, 2)
    weight = model.weight
    torch.__future__.set_overwrite_module_params_on_conversion(True)
    try:
        model.to("neuron")
    finally:
        torch.__future__.set_overwrite_module_params_on_conversion(False)
    assert model.weight is not weight and model.weight.device.type == "neuron"


def test_data_assignment_across_devices():
    t = torch.zeros(2)
    version = t._version
    t.data = torch.arange(3.0, device="neuron")
    assert t.device == torch.device("neuron:0") and t.tolist() == [0.0, 1.0, 2.0]
    t.data = torch.ones(1)
    assert t.device.type == "cpu" and t.tolist() == [1.0]
    assert t._version == version  # .data swaps do not bump the autograd version


def test_lazy_module_moved_before_first_forward():
    conv = torch.nn.LazyConv2d(4, 3)
    conv.to("neuron")
    assert isinstance(conv.weight, torch.nn.parameter.UninitializedParameter)
    assert conv.weight.device.type == "neuron"
    torch.manual_seed(0)
    x = torch.randn(1, 2, 5, 5)
    y = conv(x.to("neuron"))
    assert conv.weight.shape == (4, 2, 3, 3) and conv.weight.device.type == "neuron"
    torch.testing.assert_close(
        y.cpu(), torch.nn.functional.conv2d(x, conv.weight.cpu(), conv.bias.cpu()))


def test_incompatible_data_assignment_errors_like_cuda():
    t = torch.zeros(2, device="neuron")
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        t.data = torch.zeros(2).to_sparse()
