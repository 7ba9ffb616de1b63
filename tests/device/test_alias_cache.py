"""The host-alias cache (csrc/alias_cache.cpp): a neuron tensor used again
reuses the CPU alias its last op made. It must never change a result, keep
device memory alive, or leave an alias that outlives its bytes."""
import gc

import pytest
import torch

import torch_neuronx  # noqa: F401


def test_reused_tensors_equal_cpu_through_geometry_changes():
    a, b = torch.randn(16), torch.randn(16)
    an, bn = a.to("neuron"), b.to("neuron")
    for _ in range(3):  # the second and third calls take the cached aliases
        assert torch.equal((an + bn).cpu(), a + b)
        an.add_(bn)
        a.add_(b)
        assert torch.equal(an.cpu(), a)
    an.add_(an)  # one tensor as both arguments
    a.add_(a)
    assert torch.equal(an.cpu(), a)
    an.resize_(4, 4)  # same bytes, new geometry: the cached alias no longer matches
    a.resize_(4, 4)
    assert torch.equal((an * 2).cpu(), a * 2)
    assert torch.equal(an.t().contiguous().cpu(), a.t().contiguous())
    with torch.inference_mode():
        assert torch.equal((an * 3).cpu(), a * 3)
    assert torch.equal((an * 3).cpu(), a * 3)


def test_out_resize_through_a_cached_alias():
    out = torch.empty(3, device="neuron")
    x = torch.ones(5, device="neuron")
    torch.neg(out, out=out)  # out's alias is cached
    torch.add(x, 1, out=out.resize_(0))  # the kernel regrows the alias: it leaves the cache
    assert out.shape == (5,) and torch.equal(out.cpu(), torch.full((5,), 2.0))
    assert torch.equal((out * 2).cpu(), torch.full((5,), 4.0))


def test_cache_keeps_no_device_memory_alive():
    """The alias cache holds no reference to `big`: deleting it returns its block. (Measured as what
    the delete frees, not against a base taken earlier: under xdist, memory another test left may be
    freed meanwhile.)"""
    big = torch.randn(1 << 20, device="neuron")
    nbytes = big.untyped_storage().nbytes()
    (big * 2).sum()
    (big * 2).sum()
    gc.collect()
    held = torch.neuron.memory_allocated()
    del big
    gc.collect()
    assert held - torch.neuron.memory_allocated() >= nbytes


_kept = []
_lib = torch.library.Library("neuron_alias_cache_test", "DEF")
_lib.define("keep(Tensor x) -> Tensor")


def _keep_cpu(x):
    _kept.append(x)  # a host kernel that keeps its input past the call
    return x.clone()


_lib.impl("keep", _keep_cpu, "CPU")


def test_an_alias_kept_by_a_kernel_keeps_its_bytes():
    x = torch.arange(8.0, device="neuron")
    torch.ops.neuron_alias_cache_test.keep(x)
    torch.ops.neuron_alias_cache_test.keep(x)
    kept = _kept[-1]
    del x
    gc.collect()
    torch.randn(8, device="neuron")  # would reuse the freed block, had nothing kept it
    assert torch.equal(kept, torch.arange(8.0))
    _kept.clear()


def test_matmul_family_and_attention_through_cached_aliases():
    """The explicit kernels (csrc/kernels_matmul.cpp) take their aliases from
    the cache too: repeated calls, out= over an input, and a regrown out=."""
    g = torch.Generator().manual_seed(0)
    a, b, c = (torch.randn(8, 8, generator=g) for _ in range(3))
    an, bn, cn = a.to("neuron"), b.to("neuron"), c.to("neuron")
    for _ in range(3):
        assert torch.equal((an @ bn).cpu(), a @ b)
        assert torch.equal(torch.addmm(cn, an, bn).cpu(), torch.addmm(c, a, b))
        assert torch.equal(torch.bmm(an[None], bn[None]).cpu(), torch.bmm(a[None], b[None]))
    torch.addmm(cn, an, bn, out=cn)  # out= is also the bias: one host storage for both
    torch.addmm(c, a, b, out=c)
    assert torch.equal(cn.cpu(), c)
    out = torch.empty(0, device="neuron")
    torch.mm(an, bn, out=torch.mm(an, bn, out=out).resize_(0))  # cached, then regrown
    assert torch.equal(out.cpu(), a @ b)
    q, k, v = (torch.randn(1, 2, 4, 8, generator=g) for _ in range(3))
    qn, kn, vn = (t.to("neuron").requires_grad_() for t in (q, k, v))
    q.requires_grad_(), k.requires_grad_(), v.requires_grad_()
    for _ in range(2):
        on = torch.nn.functional.scaled_dot_product_attention(qn, kn, vn)
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        assert torch.equal(on.detach().cpu(), o.detach())
        on.sum().backward()
        o.sum().backward()
        assert torch.equal(qn.grad.cpu(), q.grad)
    with torch.inference_mode():  # aliases cached outside inference mode, then inside it, then outside
        assert torch.equal((an @ bn).cpu(), a @ b)
    assert torch.equal((an @ bn).cpu(), a @ b)


def test_copies_and_item_through_cached_aliases():
    x = torch.arange(12.0)
    xn = x.to("neuron")
    for _ in range(3):
        dst = torch.empty(12, device="neuron")
        dst.copy_(xn)
        assert torch.equal(dst.cpu(), x)
        assert xn[5].item() == 5.0
    # Overlapping views of one storage share one host storage: the CPU kernel
    # sees the overlap and refuses it, as on CPU, and nothing is written.
    for t in (x, xn):
        with pytest.raises(RuntimeError, match="refer to a single memory location"):
            t[1:].copy_(t[:-1])
    assert torch.equal(xn.cpu(), x)
    xn[1:].copy_(xn[:-1].clone())
    x[1:].copy_(x[:-1].clone())
    assert torch.equal(xn.cpu(), x)
    # neuron -> CPU and CPU -> neuron copies of a cached tensor
    assert torch.equal(xn.cpu(), x) and torch.equal(x.to("neuron").cpu(), x)
