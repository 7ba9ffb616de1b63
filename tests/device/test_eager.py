"""Eager execution: CPU-identical results, the CPU kernel (not a decomposition),
and CUDA's device rules."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_neuronx


def same(a, b):
    return torch.equal(a, b.cpu())


def test_ops_with_cpu_kernels_are_routed():
    routed = set(torch_neuronx.routed_ops())
    for op in ("aten::add.Tensor", "aten::mul_.Tensor", "aten::native_layer_norm",
               "aten::convolution", "aten::convolution_backward"):
        assert op in routed, op
    # views and transfers stay on their composite kernels
    assert "aten::_to_copy" not in routed and "aten::transpose.int" not in routed


def test_hot_ops_have_unboxed_kernels_with_the_fallback_rules():
    # csrc/direct_kernels.cpp: no IValue boxing (and no GIL) for the hottest ops
    for op in ("aten::add.Tensor", "aten::mul_.Tensor", "aten::sum.dim_IntList",
               "aten::native_layer_norm_backward", "aten::threshold_backward"):
        kernel = next(line for line in torch._C._dispatch_dump(op).splitlines()
                      if line.startswith("PrivateUse1:"))
        assert "direct_kernels.cpp" in kernel, kernel  # not the boxed fallback.cpp
    a = torch.randn(4, 5)
    an = a.neuron()
    before = torch_neuronx.get_host_kernel_calls()
    assert an.add_(an) is an and same(a + a, an)  # in-place returns the caller's tensor
    assert torch_neuronx.get_host_kernel_calls() == before + 1
    a = a + a
    mean, n_mean = a.mean(1, keepdim=True), an.mean(1, keepdim=True)
    assert same(mean, n_mean) and n_mean.untyped_storage().device.type == "neuron"
    assert same(a + torch.tensor(2.0), an + torch.tensor(2.0))  # 0-dim CPU scalars are allowed
    with pytest.raises(RuntimeError, match="same device"):
        an + a
    with pytest.raises(RuntimeError, match="neuron:0 and neuron:1"):
        an * an.to("neuron:1")


def test_layer_norm_and_softmax_bit_identical():
    x = torch.randn(8, 64)
    ln = nn.LayerNorm(64)
    assert same(ln(x), ln.neuron()(x.neuron()))
    assert same(F.softmax(x, -1), F.softmax(x.neuron(), -1))
    assert same(F.gelu(x), F.gelu(x.neuron()))


def test_sdpa_same_kernel_as_cpu():
    q, k, v = torch.randn(3, 2, 4, 32, 16).unbind(0)
    for causal in (False, True):
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        out = F.scaled_dot_product_attention(q.neuron(), k.neuron(), v.neuron(), is_causal=causal)
        assert same(ref, out)
    mask = torch.randn(32, 32)
    assert same(F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                F.scaled_dot_product_attention(q.neuron(), k.neuron(), v.neuron(),
                                               attn_mask=mask.neuron()))


def test_transformer_block_forward_backward_bit_identical():
    torch.manual_seed(0)
    block = nn.TransformerEncoderLayer(64, 4, 256, batch_first=True, dropout=0.0)
    twin = nn.TransformerEncoderLayer(64, 4, 256, batch_first=True, dropout=0.0)
    twin.load_state_dict(block.state_dict())
    twin.neuron()
    x = torch.randn(4, 16, 64)
    xc, xn = x.clone().requires_grad_(), x.neuron().requires_grad_()
    yc, yn = block(xc), twin(xn)
    assert same(yc, yn)
    yc.square().sum().backward()
    yn.square().sum().backward()
    assert same(xc.grad, xn.grad)
    for (name, p), q in zip(block.named_parameters(), twin.parameters()):
        assert same(p.grad, q.grad), name


def test_conv_pool_batchnorm_bit_identical():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.MaxPool2d(2), nn.Conv2d(8, 4, 3), nn.AdaptiveAvgPool2d(1))
    twin = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(8, 4, 3), nn.AdaptiveAvgPool2d(1))
    twin.load_state_dict(net.state_dict())
    twin.neuron()
    x = torch.randn(2, 3, 16, 16)
    xc, xn = x.clone().requires_grad_(), x.neuron().requires_grad_()
    yc, yn = net(xc), twin(xn)
    assert same(yc, yn)
    yc.sum().backward()
    yn.sum().backward()
    assert same(xc.grad, xn.grad)
    assert same(net[1].running_mean, twin[1].running_mean)


def test_indexing_reductions_and_multi_output_ops():
    x = torch.randn(6, 7)
    n = x.neuron()
    idx = torch.tensor([0, 2, 5])
    assert same(x[idx], n[idx.neuron()])
    assert same(x[idx], n[idx])  # CPU index tensors are accepted, as on CUDA
    assert same(x[x > 0], n[n > 0])
    vals, inds = torch.topk(x, 3)
    nv, ni = torch.topk(n, 3)
    assert same(vals, nv) and same(inds, ni) and nv.is_neuron and ni.is_neuron
    for a, b in zip(torch.split(x, 2), torch.split(n, 2)):
        assert same(a, b) and b.data_ptr() >= n.data_ptr()
    assert same(torch.cat([x, x]), torch.cat([n, n]))
    assert same(torch.stack([x, x], 1), torch.stack([n, n], 1))
    assert same(x.sum(0), n.sum(0)) and same(x.cumsum(1), n.cumsum(1))
    assert same(torch.sort(x, 1)[1], torch.sort(n, 1)[1])
    n2 = n.clone()
    n2.index_put_((idx.neuron(),), torch.zeros(7, device="neuron"))
    x2 = x.clone()
    x2.index_put_((idx,), torch.zeros(7))
    assert same(x2, n2)
    assert n.max().item() == x.max().item()


def test_inplace_and_out_keep_identity():
    n = torch.ones(3, device="neuron")
    r = n.add_(1)
    assert r is n and n.cpu().tolist() == [2.0] * 3
    out = torch.empty(3, device="neuron")
    r = torch.add(n, n, out=out)
    assert r is out and out.cpu().tolist() == [4.0] * 3


def test_mixed_devices_raise_like_cuda():
    n = torch.ones(3, device="neuron")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        n + torch.ones(3)
    with pytest.raises(RuntimeError, match="neuron:0 and neuron:1"):
        n + torch.ones(3, device="neuron:1")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.mm(torch.ones(2, 2, device="neuron"), torch.ones(2, 2))
    assert (n + torch.tensor(2.0)).cpu().tolist() == [3.0] * 3  # 0-dim CPU scalar is fine
    assert (n * 2).is_neuron


def test_dtypes_and_factories():
    for dtype in (torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.int64,
                  torch.bool, torch.complex64):
        x = torch.ones(4, dtype=dtype)
        assert same(x + x, x.neuron() + x.neuron())
    assert same(torch.arange(10), torch.arange(10, device="neuron"))
    assert same(torch.full((2, 2), 7.0), torch.full((2, 2), 7.0, device="neuron"))
    assert same(torch.eye(3), torch.eye(3, device="neuron"))
    assert same(torch.linspace(0, 1, 5), torch.linspace(0, 1, 5, device="neuron"))
    assert torch.zeros(2, device="neuron:2").device.index == 2
    assert torch.ones(3, device="neuron").tolist() == [1.0, 1.0, 1.0]


def test_matmul_family_and_attention_have_direct_kernels():
    a, b, c = torch.randn(4, 5), torch.randn(5, 3), torch.randn(4, 3)
    x, y, z = torch.randn(2, 3, 4), torch.randn(2, 4, 5), torch.randn(2, 3, 5)
    an, bn, cn, xn, yn, zn = (t.neuron() for t in (a, b, c, x, y, z))
    before = torch_neuronx.get_host_kernel_calls()
    results = [
        (torch.mm(a, b), torch.mm(an, bn)),
        (torch.addmm(c, a, b, beta=0.5, alpha=2), torch.addmm(cn, an, bn, beta=0.5, alpha=2)),
        (torch.bmm(x, y), torch.bmm(xn, yn)),
        (torch.baddbmm(z, x, y), torch.baddbmm(zn, xn, yn)),
    ]
    out = torch.empty(0, device="neuron")
    torch.mm(an, bn, out=out)  # out= resizes, as compiled graphs' extern calls rely on
    results.append((a @ b, out))
    assert torch_neuronx.get_host_kernel_calls() == before  # no generic fallback involved
    for ref, got in results:
        assert got.is_neuron and same(ref, got)
    torch.addmm(cn, an, bn, out=cn)  # out aliasing the input, like addmm_
    assert same(torch.addmm(c, a, b), cn)
    with pytest.raises(RuntimeError, match="same device"):
        torch.mm(an, b)
    with pytest.raises(RuntimeError, match="neuron:0 and neuron:1"):
        torch.bmm(xn, y.to("neuron:1"))
    elsewhere = torch.full((4, 3), 7.0, device="neuron:1")
    with pytest.raises(RuntimeError, match=r"neuron:0 and neuron:1! \(when checking arguments for aten::mm.out\)"):
        torch.mm(an, bn, out=elsewhere)         # out= on another core: refused, out untouched
    assert elsewhere.cpu().eq(7.0).all() and elsewhere.shape == (4, 3)
    q, k, v = (torch.randn(2, 2, 8, 4, requires_grad=True) for _ in range(3))
    qn, kn, vn = (t.detach().neuron().requires_grad_() for t in (q, k, v))
    F.scaled_dot_product_attention(q, k, v).sum().backward()
    before = torch_neuronx.get_host_kernel_calls()
    o = F.scaled_dot_product_attention(qn, kn, vn)
    assert torch_neuronx.get_host_kernel_calls() == before  # attention forward: its own kernel
    grad = torch.ones_like(o)  # what o.sum().backward() feeds in, made outside the count
    before = torch_neuronx.get_host_kernel_calls()
    o.backward(grad)
    assert torch_neuronx.get_host_kernel_calls() == before  # attention backward too
    assert same(F.scaled_dot_product_attention(q, k, v), o)
    assert same(q.grad, qn.grad) and same(v.grad, vn.grad)


def test_integer_histc_like_cuda():
    x = torch.tensor([0, 1, 1, 3, 3, 3, 7], dtype=torch.int32)
    out = torch.histc(x.neuron(), bins=8, min=0, max=7)
    assert out.dtype == torch.int32 and out.is_neuron
    assert out.cpu().tolist() == torch.histc(x.float(), bins=8, min=0, max=7).int().tolist()
    f = torch.randn(100)
    assert same(torch.histc(f, bins=10), torch.histc(f.neuron(), bins=10))
