"""Variable-length flash attention (`varlen_attn` -> aten::_flash_attention_forward/_backward) on
neuron equals per-document causal SDPA on CPU, forward and backward, eager and compiled."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.varlen import varlen_attn

DOCS = [0, 3, 9, 10]  # three packed documents, the last one token long


def _qkv(heads=4, kv_heads=4, dim=8, dtype=torch.bfloat16):
    g = torch.Generator().manual_seed(0)
    t = DOCS[-1]
    return (torch.randn(t, heads, dim, generator=g, dtype=dtype),
            torch.randn(t, kv_heads, dim, generator=g, dtype=dtype),
            torch.randn(t, kv_heads, dim, generator=g, dtype=dtype))


def _reference(q, k, v, window):
    """Per-document SDPA in float32 on CPU with the (left, right) window as a boolean mask."""
    q, k, v = (t.float().requires_grad_() for t in (q, k, v))
    outs = []
    for a, b in zip(DOCS, DOCS[1:]):
        i, j = torch.arange(b - a).unsqueeze(1), torch.arange(b - a).unsqueeze(0)
        keep = (j <= i + window[1]) & ((j >= i - window[0]) if window[0] >= 0 else True)
        outs.append(F.scaled_dot_product_attention(q[a:b].transpose(0, 1), k[a:b].transpose(0, 1),
                                                   v[a:b].transpose(0, 1), attn_mask=keep,
                                                   enable_gqa=q.shape[1] != k.shape[1]).transpose(0, 1))
    out = torch.cat(outs)
    out.backward(torch.ones_like(out))
    return out, q.grad, k.grad, v.grad


@pytest.mark.parametrize("kv_heads,window,compiled", [(4, (-1, 0), False), (2, (2, 0), False),
                                                      (4, (-1, 0), True)])
def test_varlen_attn_matches_per_document_sdpa(kv_heads, window, compiled):
    q, k, v = _qkv(kv_heads=kv_heads)
    cu = torch.tensor(DOCS, dtype=torch.int32, device="neuron")
    qn, kn, vn = (t.to("neuron").requires_grad_() for t in (q, k, v))

    def attn(a, b, c):
        return varlen_attn(a, b, c, cu, cu, 6, 6, window_size=window, enable_gqa=kv_heads != 4)

    out = (torch.compile(attn, backend="neuron") if compiled else attn)(qn, kn, vn)
    out.float().backward(torch.ones_like(out, dtype=torch.float32))
    ref = _reference(q, k, v, window)
    for name, got, want in zip(("out", "dq", "dk", "dv"), (out, qn.grad, kn.grad, vn.grad), ref):
        assert got.device.type == "neuron" and got.dtype == torch.bfloat16, name
        torch.testing.assert_close(got.float().cpu(), want, atol=2e-2, rtol=2e-2, msg=lambda m, n=name: f"{n}: {m}")


def test_unsupported_arguments_are_named():
    q, k, v = (t.to("neuron") for t in _qkv())
    cu = torch.tensor(DOCS, dtype=torch.int32, device="neuron")
    with pytest.raises(NotImplementedError, match="dropout_p"):
        torch.ops.aten._flash_attention_forward(q, k, v, cu, cu, 6, 6, 0.1, True, False)
    with pytest.raises(NotImplementedError, match="packed"):
        torch.ops.aten._flash_attention_forward(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), None, None,
                                                 10, 10, 0.0, True, False)
