"""bf16/fp16 matmuls on neuron under TORCH_NEURONX_HOST_LOW_PRECISION_GEMM (eager).

Each mode against its reference: ``fp32`` equals the fp32 CPU op on the upcast
operands rounded once (the same computation, so bitwise); ``native`` equals the
CPU's own bf16/fp16 kernel bitwise. Every test sets its mode, so the file passes
on hosts with and without native bf16 GEMMs.
"""
from __future__ import annotations

import platform

import pytest
import torch
import torch.nn.functional as F

import torch_neuronx
from torch_neuronx.runtime import host_gemm

DTYPES = [torch.bfloat16, torch.float16]
VARIABLE = host_gemm.VARIABLE


gemm_mode = host_gemm.using


def _operands(dtype, *shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g).to(dtype) for s in shapes]


# name -> (function of CPU-or-neuron tensors, operand shapes); sizes small enough for a scalar bf16 GEMM
CASES = {
    "mm": (torch.mm, [(33, 48), (48, 40)]),
    "mm_transposed": (lambda a, b: torch.mm(a.t(), b), [(48, 33), (48, 40)]),
    "bmm": (torch.bmm, [(3, 17, 24), (3, 24, 20)]),
    "addmm": (lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0), [(40,), (33, 48), (48, 40)]),
    "baddbmm": (lambda c, a, b: torch.baddbmm(c, a, b, beta=1.5, alpha=0.25), [(3, 17, 20), (3, 17, 24), (3, 24, 20)]),
    "linear_3d": (F.linear, [(2, 9, 48), (40, 48), (40,)]),
    "matmul_broadcast": (torch.matmul, [(2, 3, 17, 24), (3, 24, 20)]),
    "matmul_vector": (torch.matmul, [(17, 24), (24,)]),
}


def _on_neuron(fn, operands):
    return fn(*[t.to("neuron") for t in operands]).cpu()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(CASES))
def test_fp32_mode_equals_fp32_gemm_rounded_once(case, dtype):
    fn, shapes = CASES[case]
    operands = _operands(dtype, *shapes)
    want = fn(*[t.float() for t in operands]).to(dtype)
    with gemm_mode("fp32"):
        got = _on_neuron(fn, operands)
    assert got.dtype == dtype
    assert torch.equal(got, want), case


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(CASES))
def test_native_mode_equals_cpu_kernel(case, dtype):
    fn, shapes = CASES[case]
    operands = _operands(dtype, *shapes)
    with gemm_mode("native"):
        got = _on_neuron(fn, operands)
    assert torch.equal(got, fn(*operands)), case


@pytest.mark.parametrize("dtype", DTYPES)
def test_modes_take_different_paths(dtype):
    """At 256^3 some elements of the CPU's kernel and of fp32 accumulation differ in the last bit;
    each mode gives its own reference's bits, so the two paths are told apart."""
    a, b = _operands(dtype, (256, 256), (256, 256), seed=0)
    cpu, fp32 = a @ b, (a.float() @ b.float()).to(dtype)
    if torch.equal(cpu, fp32):
        pytest.skip("this host's CPU kernel equals fp32 accumulation for this GEMM: nothing to tell apart")
    with gemm_mode("native"):
        assert torch.equal(_on_neuron(torch.mm, [a, b]), cpu)
    with gemm_mode("fp32"):
        assert torch.equal(_on_neuron(torch.mm, [a, b]), fp32)


@pytest.mark.parametrize("dtype", DTYPES)
def test_out_variants_round_into_out(dtype):
    a, b, c = _operands(dtype, (33, 48), (48, 40), (33, 40))
    with gemm_mode("fp32"):
        out = torch.empty(33, 40, dtype=dtype, device="neuron")
        torch.mm(a.to("neuron"), b.to("neuron"), out=out)
        assert torch.equal(out.cpu(), (a.float() @ b.float()).to(dtype))
        acc = c.to("neuron")
        acc.addmm_(a.to("neuron"), b.to("neuron"))   # out aliases self: read before written
        assert torch.equal(acc.cpu(), torch.addmm(c.float(), a.float(), b.float()).to(dtype))
        wrong = torch.empty(1, dtype=dtype, device="neuron")   # the CPU kernel's resize rule
        torch.mm(a.to("neuron"), b.to("neuron"), out=wrong)
        assert wrong.shape == (33, 40)


def test_mixed_dtypes_keep_the_cpu_error():
    a, = _operands(torch.bfloat16, (4, 8))
    b = torch.randn(8, 4)
    with gemm_mode("fp32"):
        with pytest.raises(RuntimeError) as on_neuron:
            torch.mm(a.to("neuron"), b.to("neuron"))
    with pytest.raises(RuntimeError) as on_cpu:
        torch.mm(a, b)
    assert str(on_cpu.value).split("\n")[0] in str(on_neuron.value)


def _linear_grads(device, dtype, x, w, b, g):
    x = x.to(device).requires_grad_()
    lin = torch.nn.Linear(w.shape[1], w.shape[0], device=device, dtype=dtype)
    with torch.no_grad():
        lin.weight.copy_(w)
        lin.bias.copy_(b)
    y = lin(x)
    y.backward(g.to(device))
    return [t.detach().cpu() for t in (y, x.grad, lin.weight.grad)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_linear_backward_fp32_mode(dtype):
    x, w, b, g = _operands(dtype, (2, 9, 48), (40, 48), (40,), (2, 9, 40), seed=1)
    with gemm_mode("fp32"):
        y, dx, dw = _linear_grads("neuron", dtype, x, w, b, g)
    x2, g2 = x.float().reshape(-1, 48), g.float().reshape(-1, 40)
    assert torch.equal(y, F.linear(x.float(), w.float(), b.float()).to(dtype))
    assert torch.equal(dx, (g2 @ w.float()).to(dtype).reshape(2, 9, 48))
    assert torch.equal(dw, (g2.t() @ x2).to(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_linear_backward_native_mode_equals_cpu(dtype):
    x, w, b, g = _operands(dtype, (2, 9, 48), (40, 48), (40,), (2, 9, 40), seed=1)
    with gemm_mode("native"):
        got = _linear_grads("neuron", dtype, x, w, b, g)
    for want, have in zip(_linear_grads("cpu", dtype, x, w, b, g), got):
        assert torch.equal(want, have)


@pytest.mark.parametrize("dtype", DTYPES)
def test_grouped_mm_fp32_mode(dtype):
    a, w = _operands(dtype, (8, 16), (3, 16, 8))
    offs = torch.tensor([2, 5, 8], dtype=torch.int32)
    want = torch._grouped_mm(a.float(), w.float(), offs=offs).to(dtype)
    with gemm_mode("fp32"):
        got = torch._grouped_mm(a.to("neuron"), w.to("neuron"), offs=offs.to("neuron")).cpu()
    assert torch.equal(got, want)
    with gemm_mode("native"):
        got = torch._grouped_mm(a.to("neuron"), w.to("neuron"), offs=offs.to("neuron")).cpu()
    assert torch.equal(got, torch._grouped_mm(a, w, offs=offs))


def test_fp32_mode_leaves_fp32_matmuls_alone():
    a, b = _operands(torch.float32, (33, 48), (48, 40))
    with gemm_mode("fp32"):
        assert torch.equal(_on_neuron(torch.mm, [a, b]), a @ b)


def test_auto_follows_detected_capability():
    with gemm_mode("auto"):
        info = torch_neuronx.host_info()
    bf16 = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported()) and torch.backends.mkldnn.enabled
    fp16 = bool(torch.ops.mkldnn._is_mkldnn_fp16_supported()) and torch.backends.mkldnn.enabled
    assert info["native_bf16_gemm"] is bf16 and info["native_fp16_gemm"] is fp16
    assert info["low_precision_gemm"]["mode"] == "auto"
    assert info["low_precision_gemm"]["bfloat16"] == ("native" if bf16 else "fp32")
    assert info["low_precision_gemm"]["float16"] == ("native" if fp16 else "fp32")
    assert info["cpu_capability"] == torch.backends.cpu.get_cpu_capability()


_REPORT = """
import torch, torch_neuronx
info = torch_neuronx.host_info()
print(info["native_bf16_gemm"], info["low_precision_gemm"]["mode"], info["low_precision_gemm"]["source"],
      info["low_precision_gemm"]["bfloat16"], info["low_precision_gemm"]["float16"])
a = torch.randn(33, 48).bfloat16(); b = torch.randn(48, 40).bfloat16()
got = (a.to("neuron") @ b.to("neuron")).cpu()
print(torch.equal(got, (a.float() @ b.float()).bfloat16()))
"""


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="ONEDNN_MAX_CPU_ISA=AVX2 is an x86 switch")
def test_emulated_avx2_host_reports_no_native_bf16(python_subprocess):
    r = python_subprocess(_REPORT, env={"ONEDNN_MAX_CPU_ISA": "AVX2"}, unset=(VARIABLE, "TORCH_NEURONX_NUMERICS"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "auto", "default", "fp32", "fp32", "True"]


def test_trainium_numerics_implies_fp32_unless_set(python_subprocess):
    r = python_subprocess(_REPORT, env={"TORCH_NEURONX_NUMERICS": "trainium"}, unset=(VARIABLE,))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[1:] == ["fp32", "TORCH_NEURONX_NUMERICS=trainium", "fp32", "fp32", "True"]
    r = python_subprocess(_REPORT, env={"TORCH_NEURONX_NUMERICS": "trainium", VARIABLE: "native"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[1:4] == ["native", VARIABLE, "native"]


def test_invalid_value_is_a_clear_error(python_subprocess):
    r = python_subprocess("import torch\ntorch.zeros(1, device='neuron')", env={VARIABLE: "bf16"})
    assert r.returncode != 0
    assert f"{VARIABLE}='bf16' is not valid; use one of auto, native, fp32" in r.stderr
    with pytest.raises(ValueError, match="use one of auto, native, fp32"):
        host_gemm.set_mode("fast")


_FLASH = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
_FLASH_BACKWARD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default


@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_fp32_mode(dtype):
    """CPU flash attention's block GEMMs are bf16/fp16 GEMMs: under fp32 it runs on fp32 operands
    and rounds its outputs once (forward and backward)."""
    q, k, v, go = _operands(dtype, (2, 4, 16, 8), (2, 4, 16, 8), (2, 4, 16, 8), (2, 4, 16, 8), seed=3)
    check_causal_attention_in_fp32_mode(_causal_attention, q, k, v, go)


def _causal_attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def check_causal_attention_in_fp32_mode(attention, q, k, v, go):
    """``attention(q, k, v)`` on neuron under gemm mode fp32 (eager or compiled) equals CPU flash
    attention on fp32 operands with each output rounded once, forward and backward."""
    dtype = q.dtype
    out32, lse = _FLASH(q.float(), k.float(), v.float(), 0.0, True)
    out = out32.to(dtype)
    grads = [t.to(dtype) for t in _FLASH_BACKWARD(go.float(), q.float(), k.float(), v.float(), out.float(), lse,
                                                   0.0, True)]
    qn, kn, vn = (t.to("neuron").requires_grad_() for t in (q, k, v))
    with gemm_mode("fp32"):
        y = attention(qn, kn, vn)
        y.backward(go.to("neuron"))
    assert torch.equal(y.detach().cpu(), out)
    for want, got in zip(grads, (qn.grad, kn.grad, vn.grad)):
        assert torch.equal(got.cpu(), want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_native_mode_equals_cpu(dtype):
    q, k, v, go = _operands(dtype, (2, 4, 16, 8), (2, 4, 16, 8), (2, 4, 16, 8), (2, 4, 16, 8), seed=3)
    results = []
    for device in ("cpu", "neuron"):
        qd, kd, vd = (t.detach().to(device, copy=True).requires_grad_() for t in (q, k, v))
        with gemm_mode("native"):
            y = F.scaled_dot_product_attention(qd, kd, vd, is_causal=True)
            y.backward(go.to(device))
        results.append([t.detach().cpu() for t in (y, qd.grad, kd.grad, vd.grad)])
    for want, got in zip(*results):
        assert torch.equal(want, got)


@pytest.mark.parametrize("dtype", DTYPES)
def test_convolution_fp32_mode(dtype):
    """A CPU convolution is im2col and the dtype's GEMM: under fp32 it runs on fp32 operands and
    rounds its results once (forward and the three gradients)."""
    x, w, b, go = _operands(dtype, (2, 8, 12, 12), (16, 8, 3, 3), (16,), (2, 16, 10, 10), seed=4)
    want = F.conv2d(x.float(), w.float(), b.float()).to(dtype)
    grads = torch.ops.aten.convolution_backward(go.float(), x.float(), w.float(), [16], [1, 1], [0, 0], [1, 1],
                                                False, [0, 0], 1, [True, True, True])
    xn, wn, bn = (t.to("neuron").requires_grad_() for t in (x, w, b))
    with gemm_mode("fp32"):
        y = F.conv2d(xn, wn, bn)
        y.backward(go.to("neuron"))
    assert torch.equal(y.detach().cpu(), want)
    for ref, got in zip(grads, (xn.grad, wn.grad, bn.grad)):
        assert got.dtype == dtype and torch.equal(got.cpu(), ref.to(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_convolution_native_mode_equals_cpu(dtype):
    x, w, b, go = _operands(dtype, (2, 8, 12, 12), (16, 8, 3, 3), (16,), (2, 16, 10, 10), seed=4)
    results = []
    for device in ("cpu", "neuron"):
        xd, wd, bd = (t.detach().to(device, copy=True).requires_grad_() for t in (x, w, b))
        with gemm_mode("native"):
            y = F.conv2d(xd, wd, bd)
            y.backward(go.to(device))
        results.append([t.detach().cpu() for t in (y, xd.grad, wd.grad, bd.grad)])
    for want, got in zip(*results):
        assert torch.equal(want, got)
