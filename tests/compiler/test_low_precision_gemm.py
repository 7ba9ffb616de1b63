"""bf16/fp16 GEMMs of compiled neuron graphs under TORCH_NEURONX_HOST_LOW_PRECISION_GEMM
(torch_neuronx/compiler/_low_precision_gemm.py).

``fp32``: Inductor's extern GEMMs take fp32 buffers (the conversions are C++ kernels) and the
results equal fp32 GEMMs of the upcast operands rounded once, bitwise, forward and backward.
``native``: the program keeps the dtype's GEMMs and equals the CPU's eager results bitwise.
Each test sets its mode, so the file passes on hosts with and without native bf16 GEMMs.
"""
from __future__ import annotations

import re

import pytest
import torch
from torch._inductor.utils import run_and_get_code

from tests.device.test_low_precision_gemm import check_causal_attention_in_fp32_mode
from torch_neuronx.runtime import host_gemm

DTYPES = [torch.bfloat16, torch.float16]
# An extern GEMM call of the program and the buffer allocations of a dtype.
EXTERN = re.compile(r"extern_kernels\.(mm|addmm|bmm|baddbmm)\(")


gemm_mode = host_gemm.using


def _rand(dtype, *shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def _linear_step(dtype, x, w, b, g):
    """Compiled nn.Linear forward and backward on neuron: (y, dx, dW, code of both graphs)."""
    lin = torch.nn.Linear(w.shape[1], w.shape[0], device="neuron", dtype=dtype)
    with torch.no_grad():
        lin.weight.copy_(w)
        lin.bias.copy_(b)
    xn = x.to("neuron").requires_grad_()
    f = torch.compile(lin, backend="neuron", dynamic=False)

    def step():
        y = f(xn)
        y.backward(g.to("neuron"))
        return y

    y, code = run_and_get_code(step)
    return y.detach().cpu(), xn.grad.cpu(), lin.weight.grad.cpu(), "\n".join(code)


def _float32_allocations(code: str) -> int:
    return code.count("torch.float32, 0)") + code.count("dtype=torch.float32")


@pytest.mark.parametrize("dtype", DTYPES)
def test_fp32_mode_linear_forward_backward(dtype):
    x, w, b, g = _rand(dtype, 16, 96), _rand(dtype, 40, 96, seed=1), _rand(dtype, 40, seed=2), _rand(dtype, 16, 40, seed=3)
    with gemm_mode("fp32"):
        y, dx, dw, code = _linear_step(dtype, x, w, b, g)
    assert torch.equal(y, torch.addmm(b.float(), x.float(), w.float().t()).to(dtype))
    assert torch.equal(dx, (g.float() @ w.float()).to(dtype))
    assert torch.equal(dw, (g.float().t() @ x.float()).to(dtype))
    # what the generated program shows: the extern GEMMs write fp32 buffers the C++ kernels convert
    assert len(EXTERN.findall(code)) == 3
    assert _float32_allocations(code) >= 3


@pytest.mark.parametrize("dtype", DTYPES)
def test_native_mode_linear_equals_cpu(dtype):
    x, w, b, g = _rand(dtype, 16, 96), _rand(dtype, 40, 96, seed=1), _rand(dtype, 40, seed=2), _rand(dtype, 16, 40, seed=3)
    with gemm_mode("native"):
        y, dx, dw, code = _linear_step(dtype, x, w, b, g)
    lin = torch.nn.Linear(96, 40, dtype=dtype)
    with torch.no_grad():
        lin.weight.copy_(w)
        lin.bias.copy_(b)
    xc = x.clone().requires_grad_()
    yc = lin(xc)
    yc.backward(g)
    assert torch.equal(y, yc.detach()) and torch.equal(dx, xc.grad) and torch.equal(dw, lin.weight.grad)
    assert len(EXTERN.findall(code)) == 3
    assert _float32_allocations(code) == 0


@pytest.mark.parametrize("dtype", DTYPES)
def test_fp32_mode_batched_matmuls(dtype):
    def attention_like(q, k, v):
        return torch.matmul(q, k.transpose(-1, -2)), torch.baddbmm(v, q, k.transpose(-1, -2)[..., :8])

    q, k, v = _rand(dtype, 4, 16, 8), _rand(dtype, 4, 16, 8, seed=1), _rand(dtype, 4, 16, 8, seed=2)
    with gemm_mode("fp32"):
        (a, c), code = run_and_get_code(torch.compile(attention_like, backend="neuron", dynamic=False),
                                        q.to("neuron"), k.to("neuron"), v.to("neuron"))
    assert torch.equal(a.cpu(), torch.matmul(q.float(), k.float().transpose(-1, -2)).to(dtype))
    assert torch.equal(c.cpu(), torch.baddbmm(v.float(), q.float(), k.float().transpose(-1, -2)[..., :8]).to(dtype))
    assert len(EXTERN.findall("\n".join(code))) == 2


def _ulps(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.view(torch.int16).int() - b.view(torch.int16).int()).abs()


@pytest.mark.parametrize("dtype", DTYPES)
def test_fp32_mode_decode_gemms_are_fp32_reductions(dtype):
    """One-row GEMMs (decode) are an fp32 multiply-and-sum kernel reading the weight once: fp32
    accumulation and one rounding, in Inductor's summation order (within one ulp of the fp32 GEMM)."""
    x, w, b = _rand(dtype, 1, 512), _rand(dtype, 384, 512, seed=1), _rand(dtype, 384, seed=2)
    lin = torch.nn.Linear(512, 384, device="neuron", dtype=dtype)
    with torch.no_grad():
        lin.weight.copy_(w)
        lin.bias.copy_(b)
    with gemm_mode("fp32"), torch.no_grad():
        y, code = run_and_get_code(torch.compile(lin, backend="neuron", dynamic=False), x.to("neuron"))
    code = "\n".join(code)
    ref = torch.addmm(b.float(), x.float(), w.float().t()).to(dtype)
    assert _ulps(y.cpu(), ref).max() <= 1
    assert (y.cpu() != ref).float().mean() < 0.05
    assert not EXTERN.search(code)                   # no extern GEMM and no fp32 copy of the weight:
    assert not [line for line in code.splitlines() if "torch.float32" in line and "512" in line]
    assert len(re.findall(r"^\s+cpp_fused_\w+\(", code, re.M)) == 1   # one C++ kernel does it all


def test_fp32_mode_grouped_mm():
    """A compiled _grouped_mm runs the neuron kernel (not the CPU's, as a host program would)."""
    a, w = _rand(torch.bfloat16, 64, 256), _rand(torch.bfloat16, 3, 256, 128, seed=1)
    offs = torch.tensor([20, 40, 64], dtype=torch.int32)
    f = torch.compile(lambda a, w, o: torch._grouped_mm(a, w, offs=o), backend="neuron", dynamic=False)
    with gemm_mode("fp32"):
        got = f(a.to("neuron"), w.to("neuron"), offs.to("neuron")).cpu()
    assert torch.equal(got, torch._grouped_mm(a.float(), w.float(), offs=offs).bfloat16())
    torch._dynamo.reset()
    with gemm_mode("native"):
        got = f(a.to("neuron"), w.to("neuron"), offs.to("neuron")).cpu()
    assert torch.equal(got, torch._grouped_mm(a, w, offs=offs))


def test_mode_is_part_of_the_compiled_program():
    """A graph compiled under one mode is not served to the other; the same mode is served again."""
    def f(a, b):
        return a @ b

    a, b = _rand(torch.bfloat16, 24, 32).to("neuron"), _rand(torch.bfloat16, 32, 16, seed=1).to("neuron")
    seen = []
    for mode in ("fp32", "native", "fp32"):
        torch._dynamo.reset()
        with gemm_mode(mode):
            out, code = run_and_get_code(torch.compile(f, backend="neuron", dynamic=False), a, b)
        seen.append((len(code), _float32_allocations("\n".join(code))))
        if mode == "fp32":
            assert torch.equal(out.cpu(), (a.cpu().float() @ b.cpu().float()).bfloat16())
    fresh_fp32, fresh_native, cached_fp32 = seen
    assert fresh_fp32[0] == 1 and fresh_fp32[1] > 0
    assert fresh_native == (1, 0)          # compiled anew, with the dtype's own GEMM
    assert cached_fp32[0] == 0             # the first program, from the compile cache


def test_fp32_matmuls_are_not_rewritten():
    def f(a, b):
        return a @ b

    a, b = torch.randn(24, 32), torch.randn(32, 16)
    with gemm_mode("fp32"):
        out, code = run_and_get_code(torch.compile(f, backend="neuron", dynamic=False), a.to("neuron"), b.to("neuron"))
    assert torch.equal(out.cpu(), a @ b)
    assert "cpp_fused" not in "\n".join(code)   # no conversion kernels: the extern mm alone


@pytest.mark.parametrize("dtype", DTYPES)
def test_fp32_mode_compiled_attention(dtype):
    """CPU flash attention in a compiled graph (forward and backward) runs on fp32 operands with
    one rounding of each bf16/fp16 result, as eager does."""
    q, k, v, go = (_rand(dtype, 2, 4, 16, 8, seed=s) for s in range(4))
    f = torch.compile(lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
                      backend="neuron", dynamic=False)
    check_causal_attention_in_fp32_mode(f, q, k, v, go)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fp32_mode_compiled_convolution(dtype):
    x, w, go = _rand(dtype, 2, 8, 12, 12), _rand(dtype, 16, 8, 3, 3, seed=1), _rand(dtype, 2, 16, 10, 10, seed=2)
    want = torch.nn.functional.conv2d(x.float(), w.float()).to(dtype)
    gx, gw, _ = torch.ops.aten.convolution_backward(go.float(), x.float(), w.float(), None, [1, 1], [0, 0], [1, 1],
                                                    False, [0, 0], 1, [True, True, False])
    xn, wn = x.to("neuron").requires_grad_(), w.to("neuron").requires_grad_()
    f = torch.compile(torch.nn.functional.conv2d, backend="neuron", dynamic=False)
    with gemm_mode("fp32"):
        y = f(xn, wn)
        y.backward(go.to("neuron"))
    assert torch.equal(y.detach().cpu(), want)
    assert torch.equal(xn.grad.cpu(), gx.to(dtype)) and torch.equal(wn.grad.cpu(), gw.to(dtype))
