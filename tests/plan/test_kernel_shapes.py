"""A dry run shapes neuron-only kernels as the kernels shape them, where PyTorch's meta kernel differs:
varlen attention with a value head_dim unlike the query's (MLA, as DeepSeek-V3's)."""
from __future__ import annotations

import pytest
import torch
from torch.nn.attention.varlen import varlen_attn

from torch_neuronx import plan

DOCS = [0, 5, 16]  # two packed documents


def _inputs(qk_dim=12, v_dim=8, heads=2, device="neuron"):
    g = torch.Generator().manual_seed(0)
    t = DOCS[-1]
    q, k, v = (torch.randn(t, heads, d, generator=g).to(device).requires_grad_() for d in (qk_dim, qk_dim, v_dim))
    cu = torch.tensor(DOCS, dtype=torch.int32, device=device)
    return q, k, v, cu


@pytest.fixture
def small_threshold(monkeypatch):
    # these small tensors count as large, so the dry run computes only shapes, as at full size
    monkeypatch.setenv("TORCH_NEURONX_DRY_RUN_LARGE_BYTES", "64")


def test_varlen_attention_with_narrower_values_plans_with_the_kernels_shapes(small_threshold):
    q, k, v, cu = _inputs()
    real = varlen_attn(q, k, v, cu, cu, 11, 11, window_size=(-1, 0))   # the kernel itself, for real
    assert real.shape == (16, 2, 8)
    with plan.dry_run() as run:
        q, k, v, cu = _inputs()
        out = varlen_attn(q, k, v, cu, cu, 11, 11, window_size=(-1, 0))
        out.sum().backward()
    assert out.shape == real.shape and out.dtype == real.dtype and out.device.type == "neuron"
    assert (q.grad.shape, k.grad.shape, v.grad.shape) == ((16, 2, 12), (16, 2, 12), (16, 2, 8))
    assert run.ops["torch_attn::_varlen_attn"] == 1   # varlen_attn's custom op, shaped without running


def test_shape_function_matches_the_kernels_outputs():
    from torch_neuronx import kernels

    q, k, v, cu = _inputs()
    args = (q.detach(), k.detach(), v.detach(), cu, cu, 11, 11, 0.0, True, False)
    real = torch.ops.aten._flash_attention_forward(*args)
    shaped = kernels.output_shapes("aten::_flash_attention_forward")(*args)
    assert [(t.shape, t.dtype, t.device) for t in shaped] == [(t.shape, t.dtype, t.device) for t in real]
    real = torch.ops.torch_attn._varlen_attn(*args[:7], True)
    shaped = kernels.output_shapes("torch_attn::_varlen_attn")(*args[:7], True)
    assert [(t.shape, t.dtype, t.device) for t in shaped] == [(t.shape, t.dtype, t.device) for t in real]
    assert kernels.output_shapes("aten::mm") is None   # ops without a neuron difference use the meta kernel
