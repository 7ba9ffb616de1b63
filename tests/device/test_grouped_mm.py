"""MoE matmuls on neuron: `torch._grouped_mm` (eager and compiled, forward and backward) equals CPU;
bad offsets and `torch._scaled_grouped_mm` (no kernel in torch 2.13) give clear errors."""
from __future__ import annotations

import pytest
import torch

OFFS_M = [2, 5, 8]  # 2D x 3D: group ends over the 8 rows of the tokens
OFFS_K = [8, 16, 24]  # 2D x 2D: group ends over the shared K dimension (multiples of 16 bytes)


def _forms():
    """name -> (a, b, offs) for each form torch 2.13 offers (dims aligned to 16 bytes in bf16)."""
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    i32 = lambda v: torch.tensor(v, dtype=torch.int32)  # noqa: E731
    return {"2d_3d": (r(8, 16), r(3, 16, 8), i32(OFFS_M)),
            "3d_3d": (r(3, 8, 16), r(3, 16, 8), None),
            "2d_2d": (r(8, 24), r(24, 16), i32(OFFS_K)),
            "3d_2d": (r(3, 8, 16), r(16, 24), i32(OFFS_K))}


def _run(fn, a, b, offs, device, dtype, expanded_grad=False):
    a = a.to(device, dtype, copy=True).requires_grad_()
    b = b.to(device, dtype, copy=True).requires_grad_()
    y = fn(a, b, None if offs is None else offs.to(device))
    if expanded_grad:  # the gradient of sum() is an expanded, all-zero-stride tensor
        y.sum().backward()
    else:
        y.backward(torch.ones_like(y))
    return [t.detach().cpu() for t in (y, a.grad, b.grad)]


def _grouped(a, b, offs):
    return torch._grouped_mm(a, b, offs=offs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("form", list(_forms()))
def test_grouped_mm_forward_backward_equal_cpu(form, dtype):
    a, b, offs = _forms()[form]
    want = _run(_grouped, a, b, offs, "cpu", dtype)
    for got in (_run(_grouped, a, b, offs, "neuron", dtype),
                # CPU's own kernel refuses this gradient in torch 2.13 ("Invalid strides/sizes, got
                # [0, 0]"); neuron gives it a dense layout, so it equals CPU's dense-gradient run
                _run(_grouped, a, b, offs, "neuron", dtype, expanded_grad=True)):
        for w, g in zip(want, got):
            assert torch.equal(w, g), form


def test_grouped_mm_compiled_forward_backward_equal_cpu():
    forms = _forms()

    def all_forms(*tensors):
        out = []
        for i, (_, _, offs) in enumerate(forms.values()):
            a, b = tensors[2 * i], tensors[2 * i + 1]
            out.append(torch._grouped_mm(a, b, offs=None if offs is None else offs.to(a.device)))
        return out

    def run(fn, device):
        leaves = [t.to(device, torch.bfloat16, copy=True).requires_grad_() for a, b, _ in forms.values() for t in (a, b)]
        outs = fn(*leaves)
        torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])
        return [o.detach().cpu() for o in outs] + [t.grad.cpu() for t in leaves]

    want = run(all_forms, "cpu")
    got = run(torch.compile(all_forms, backend="neuron", fullgraph=True), "neuron")
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w, rtol=0, atol=0)


@pytest.mark.parametrize("offs,match", [
    ([5, 2, 8], "offs must be non-decreasing"),
    ([2, 5, 9], r"offs must lie in \[0, 8\] \(the rows of self"),
    ([-1, 5, 8], r"offs must lie in \[0, 8\]"),
])
def test_grouped_mm_bad_offsets_raise(offs, match):
    # CPU accepts these and reads outside its operand; neuron says what is wrong
    a = torch.randn(8, 16, device="neuron")
    b = torch.randn(3, 16, 8, device="neuron")
    before = a.clone()
    with pytest.raises(RuntimeError, match=match):
        torch._grouped_mm(a, b, offs=torch.tensor(offs, dtype=torch.int32, device="neuron"))
    assert torch.equal(a, before)
    with pytest.raises(RuntimeError, match="offs must be a 1-D int32 tensor"):
        torch._grouped_mm(a, b, offs=torch.tensor([2, 5, 8], device="neuron"))
    with pytest.raises(RuntimeError, match="all operands must be on one device, got self on neuron:0, mat2 on neuron:0, offs on cpu"):
        torch._grouped_mm(a, b, offs=torch.tensor([2, 5, 8], dtype=torch.int32))


def test_scaled_grouped_mm_names_the_op_and_the_alternative():
    a = torch.randn(16, 32, device="neuron").to(torch.float8_e4m3fn)
    b = torch.randn(2, 16, 32, device="neuron").to(torch.float8_e4m3fn).transpose(-2, -1)
    scale_a, scale_b = torch.ones(16, device="neuron"), torch.ones(2, 16, device="neuron")
    offs = torch.tensor([8, 16], dtype=torch.int32, device="neuron")
    with pytest.raises(NotImplementedError, match=r"torch\._scaled_grouped_mm .*no neuron kernel.*torch\._grouped_mm"):
        torch._scaled_grouped_mm(a, b, scale_a, scale_b, offs=offs, out_dtype=torch.bfloat16)
