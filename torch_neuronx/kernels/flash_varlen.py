"""Variable-length flash attention on the neuron device (`aten::_flash_attention_forward/_backward`).

PyTorch's only kernels for these ops are CUDA ones; `torch.nn.attention.varlen.varlen_attn` (the
attention of TorchTitan's Llama 3 with `attn_backend="varlen"`) calls them on packed documents:
query/key/value are (tokens, heads, head_dim) and `cum_seq_q`/`cum_seq_k` mark where each document
starts. Here each document is attended on its own with the math formulation in float32 (inputs are
bf16/fp16 there), the log-sum-exp is returned as (heads, tokens) in float32 as flash does, and the
backward recomputes each document's probabilities (no state is kept between the two). Windows follow flash's convention:
`window_size_left/right` of -1 is unlimited, causal is the bottom-right-aligned (-1, 0) window.
Dropout, paged KV (`block_table`), `seqused_k` and ALiBi are refused by name.
"""
from __future__ import annotations

import math

import torch


def _unsupported(**args) -> None:
    for name, value in args.items():
        if value is not None and value is not False and value != 0.0:
            raise NotImplementedError(
                f"_flash_attention_forward on neuron: `{name}` is not supported (got {value!r}); "
                "call it with dropout_p=0 and without block_table, seqused_k or alibi_slopes")


def _window(is_causal, left, right) -> tuple[int, int]:
    left = -1 if left is None else int(left)
    right = (0 if is_causal else -1) if right is None else int(right)
    return left, (0 if is_causal and right < 0 else right)


def _probs(q32, k32, scale, left, right):
    """Attention probabilities (H, Lq, Lk) and log-sum-exp (H, Lq) of one document, in float32."""
    scores = torch.matmul(q32, k32.transpose(-2, -1)) * scale
    lq, lk = scores.shape[-2:]
    i = torch.arange(lq, device=q32.device).unsqueeze(1) + (lk - lq)  # bottom-right alignment, as flash
    j = torch.arange(lk, device=q32.device).unsqueeze(0)
    keep = torch.ones(lq, lk, dtype=torch.bool, device=q32.device)
    if right >= 0:
        keep &= j <= i + right
    if left >= 0:
        keep &= j >= i - left
    scores = scores.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    return torch.exp(scores - lse.unsqueeze(-1)).nan_to_num(0.0), lse  # rows with no key attend to nothing


def _heads(q, k, v):
    """(L, H, D) -> float32 (H, L, D), with kv heads repeated for grouped-query attention."""
    q32, k32, v32 = (t.float().transpose(0, 1) for t in (q, k, v))
    groups = q32.shape[0] // k32.shape[0]
    if groups > 1:
        k32, v32 = k32.repeat_interleave(groups, 0), v32.repeat_interleave(groups, 0)
    return q32, k32, v32, groups


def _document(q, k, v, scale, left, right):
    """One document: q (Lq, H, D), k/v (Lk, Hk, D) -> out (Lq, H, Dv) in q's dtype, lse (H, Lq) fp32."""
    q32, k32, v32, _ = _heads(q, k, v)
    probs, lse = _probs(q32, k32, scale, left, right)
    return torch.matmul(probs, v32).transpose(0, 1).to(q.dtype), lse


def _document_backward(dout, q, k, v, scale, left, right):
    """Gradients of `_document` (the softmax-attention backward, in float32): dq, dk, dv in the inputs' layout."""
    q32, k32, v32, groups = _heads(q, k, v)
    probs, _ = _probs(q32, k32, scale, left, right)
    do32 = dout.float().transpose(0, 1)
    dv = torch.matmul(probs.transpose(-2, -1), do32)
    dp = torch.matmul(do32, v32.transpose(-2, -1))
    ds = probs * (dp - (dp * probs).sum(-1, keepdim=True)) * scale
    dq = torch.matmul(ds, k32)
    dk = torch.matmul(ds.transpose(-2, -1), q32)
    if groups > 1:  # sum the repeated query heads back onto their kv head
        dk = dk.unflatten(0, (-1, groups)).sum(1)
        dv = dv.unflatten(0, (-1, groups)).sum(1)
    return (dq.transpose(0, 1).to(q.dtype), dk.transpose(0, 1).to(k.dtype), dv.transpose(0, 1).to(v.dtype))


def _bounds(cum_seq: torch.Tensor | None, total: int) -> list[int]:
    return [0, total] if cum_seq is None else [int(x) for x in cum_seq.cpu().tolist()]


def flash_attention_forward(query, key, value, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal,
                            return_debug_mask, *, scale=None, window_size_left=None, window_size_right=None,
                            seqused_k=None, alibi_slopes=None, block_table=None, num_splits=None):
    _unsupported(dropout_p=dropout_p, return_debug_mask=return_debug_mask, seqused_k=seqused_k,
                 alibi_slopes=alibi_slopes, block_table=block_table)
    if query.dim() != 3:
        raise NotImplementedError("_flash_attention_forward on neuron takes the packed (tokens, heads, head_dim) "
                                  f"layout of varlen_attn; got query of shape {tuple(query.shape)}")
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    left, right = _window(is_causal, window_size_left, window_size_right)
    bq, bk = _bounds(cum_seq_q, query.shape[0]), _bounds(cum_seq_k, key.shape[0])
    if len(bq) != len(bk):
        raise ValueError(f"cum_seq_q has {len(bq)} entries and cum_seq_k {len(bk)}; they must describe "
                         "the same number of documents")
    out = query.new_zeros(query.shape[:-1] + value.shape[-1:])
    lse = torch.full((query.shape[1], query.shape[0]), float("-inf"), dtype=torch.float32, device=query.device)
    for d in range(len(bq) - 1):
        if bq[d + 1] > bq[d]:
            o, s = _document(query[bq[d]:bq[d + 1]], key[bk[d]:bk[d + 1]], value[bk[d]:bk[d + 1]],
                             scale, left, right)
            out[bq[d]:bq[d + 1]] = o
            lse[:, bq[d]:bq[d + 1]] = s
    rng_state = torch.zeros(2, dtype=torch.uint64, device=query.device)  # no dropout: nothing to replay
    empty = query.new_empty(0)
    return out, lse, rng_state, empty, empty


def flash_attention_backward(grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k,
                             dropout_p, is_causal, rng_state, unused, *, scale=None, window_size_left=None,
                             window_size_right=None):
    _unsupported(dropout_p=dropout_p)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    left, right = _window(is_causal, window_size_left, window_size_right)
    bq, bk = _bounds(cum_seq_q, query.shape[0]), _bounds(cum_seq_k, key.shape[0])
    gq, gk, gv = torch.zeros_like(query), torch.zeros_like(key), torch.zeros_like(value)
    for d in range(len(bq) - 1):
        if bq[d + 1] == bq[d]:
            continue
        dq, dk, dv = _document_backward(grad_out[bq[d]:bq[d + 1]], query[bq[d]:bq[d + 1]],
                                        key[bk[d]:bk[d + 1]], value[bk[d]:bk[d + 1]], scale, left, right)
        gq[bq[d]:bq[d + 1]] = dq
        gk[bk[d]:bk[d + 1]] += dk
        gv[bk[d]:bk[d + 1]] += dv
    return gq, gk, gv


def flash_attention_forward_shapes(query, key, value, *args, **kwargs):
    """Empty outputs shaped as `flash_attention_forward`'s (on query's device, meta in a dry run).

    PyTorch's meta kernel shapes the output like the query (CUDA's flash needs one head_dim); this kernel
    takes the value's head_dim (MLA, as DeepSeek-V3's, has 192 for query/key and 128 for value)."""
    out = query.new_empty(query.shape[:-1] + value.shape[-1:])
    lse = query.new_empty((query.shape[1], query.shape[0]), dtype=torch.float32)
    empty = query.new_empty(0)
    return out, lse, query.new_empty(2, dtype=torch.uint64), empty, empty


# Output shapes that differ from PyTorch's meta kernels, by op name: a dry run (plan) computes these
# ops' shapes from here rather than from the meta kernel.
def varlen_attn_shapes(query, key, value, *args, **kwargs):
    """`torch_attn::_varlen_attn` (varlen_attn's custom op, which calls the kernel): output, lse, rng state."""
    return flash_attention_forward_shapes(query, key, value)[:3]


SHAPES = {"aten::_flash_attention_forward": flash_attention_forward_shapes,
          "torch_attn::_varlen_attn": varlen_attn_shapes}


def register(lib: torch.library.Library, dispatch_key: str = "PrivateUse1") -> None:
    lib.impl("_flash_attention_forward", flash_attention_forward, dispatch_key)
    lib.impl("_flash_attention_backward", flash_attention_backward, dispatch_key)
