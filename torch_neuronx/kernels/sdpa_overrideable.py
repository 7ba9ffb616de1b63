"""SDPA's backend hook for the neuron device.

`aten::_scaled_dot_product_fused_attention_overrideable` (and its backward)
is the attention kernel PyTorch reserves for out-of-tree backends: SDPA calls
it when the backend's `_fused_sdp_choice` answers OVERRIDEABLE (on neuron:
when `sdpa_kernel(SDPBackend.OVERRIDEABLE)` leaves it the only backend), and
code may call it directly. By default neuron still picks the CPU's own flash
kernel (bit-identical to CPU); this hook gives the same numbers:

- without dropout it runs that CPU flash kernel and its backward (through
  the explicit kernels in csrc/kernels_matmul.cpp), so the result equals
  the default path;
- with dropout (which the CPU flash kernel lacks) it runs the math
  formulation; the keep-mask is drawn from the device's generator, whose
  16-byte (seed, offset) state is returned as philox_seed/philox_offset and
  redraws the identical mask in backward, which is what those outputs are for;
- a gradient for `attn_bias` is computed from the softmax recovered from
  logsumexp (the flash backward has none).
"""
from __future__ import annotations

import math

import torch

aten = torch.ops.aten


def _scale(query: torch.Tensor, scale: float | None) -> float:
    return 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale


def _scores(query, key, attn_bias, is_causal, scale):
    """scale * q k^T + bias, with -inf above the diagonal when causal (SDPA's math)."""
    scores = torch.matmul(query * math.sqrt(scale), key.transpose(-2, -1) * math.sqrt(scale))
    if is_causal:
        L, S = scores.shape[-2:]
        keep = torch.ones(L, S, dtype=torch.bool, device=query.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if attn_bias is not None:
        if attn_bias.dtype == torch.bool:
            scores = scores.masked_fill(~attn_bias, float("-inf"))
        else:
            scores = scores + attn_bias
    return scores


def _acc(t: torch.Tensor) -> torch.dtype:
    """Softmax accumulation dtype: float32 for low-precision inputs, else the input's."""
    return torch.promote_types(t.dtype, torch.float32)


def _philox_state(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    state = torch.neuron.get_rng_state(device)  # uint8[16]: (seed u64, offset u64)
    seed, offset = state.view(torch.int64)
    return seed.clone(), offset.clone()


def _keep_mask(shape, p: float, device, seed: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    gen = torch.Generator(device)
    gen.set_state(torch.stack((seed, offset)).view(torch.uint8))
    return torch.rand(shape, device=device, generator=gen) >= p


def _additive(mask, dtype):
    """A boolean mask (True: attend) as the additive mask the flash kernel takes."""
    if mask is None or mask.dtype != torch.bool:
        return mask
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, float("-inf"))


def _batched(t):
    return None if t is None else (t.unsqueeze(0) if t.dim() == 3 else t)


def fused_attention(query, key, value, attn_bias=None, dropout_p=0.0, is_causal=False,
                    return_debug_mask=False, *, scale=None):
    if query.dim() not in (3, 4):
        raise RuntimeError(f"query must be 3D or 4D, got {query.dim()}D (shape {list(query.shape)})")
    squeeze = query.dim() == 3
    q, k, v = _batched(query), _batched(key), _batched(value)
    seed, offset = torch.zeros((), dtype=torch.int64), torch.zeros((), dtype=torch.int64)
    if dropout_p == 0.0:
        out, lse = aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, 0.0, is_causal, attn_mask=_additive(attn_bias, q.dtype), scale=scale)
    else:
        seed, offset = _philox_state(query.device)
        scores = _scores(q, k, attn_bias, is_causal, _scale(q, scale)).to(_acc(q))
        lse = torch.logsumexp(scores, -1)
        probs = torch.exp(scores - lse.unsqueeze(-1))
        keep = torch.rand(probs.shape, device=query.device) >= dropout_p  # advances the generator
        out = torch.matmul((probs * keep / (1 - dropout_p)).to(v.dtype), v)
    if squeeze:
        out = out.squeeze(0)
    L, S = query.shape[-2], key.shape[-2]
    return out, lse, None, None, L, S, seed, offset, None


def fused_attention_backward(grad_out, query, key, value, attn_bias, grad_input_mask, out, logsumexp,
                             cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed,
                             philox_offset, *, scale=None):
    if grad_out is None:  # no gradient reached the output: none for the inputs either
        return None, None, None, None
    squeeze = query.dim() == 3
    q, k, v, go, o = map(_batched, (query, key, value, grad_out, out))
    want_bias = bool(grad_input_mask[3]) and attn_bias is not None and attn_bias.is_floating_point()
    grad_bias = None
    if dropout_p == 0.0:
        gq, gk, gv = aten._scaled_dot_product_flash_attention_for_cpu_backward(
            go, q, k, v, o, logsumexp, 0.0, is_causal, attn_mask=_additive(attn_bias, q.dtype),
            scale=scale)
        if want_bias:
            acc = _acc(q)
            probs = torch.exp(_scores(q, k, attn_bias, is_causal, _scale(q, scale)).to(acc)
                              - logsumexp.unsqueeze(-1))
            grad_probs = torch.matmul(go.to(acc), v.to(acc).transpose(-2, -1))
            grad_scores = probs * (grad_probs - (grad_probs * probs).sum(-1, keepdim=True))
            grad_bias = grad_scores
    else:
        sc, acc = _scale(q, scale), _acc(q)
        probs = torch.exp(_scores(q, k, attn_bias, is_causal, sc).to(acc) - logsumexp.unsqueeze(-1))
        keep = _keep_mask(probs.shape, dropout_p, query.device, philox_seed, philox_offset)
        dropped = probs * keep / (1 - dropout_p)
        gv = torch.matmul(dropped.transpose(-2, -1), go.to(acc)).to(v.dtype)
        grad_probs = torch.matmul(go.to(acc), v.to(acc).transpose(-2, -1)) * keep / (1 - dropout_p)
        grad_scores = probs * (grad_probs - (grad_probs * probs).sum(-1, keepdim=True))
        gq = (torch.matmul(grad_scores, k.to(acc)) * sc).to(q.dtype)
        gk = (torch.matmul(grad_scores.transpose(-2, -1), q.to(acc)) * sc).to(k.dtype)
        grad_bias = grad_scores if want_bias else None
    if grad_bias is not None:  # reduce over the dimensions the bias was broadcast along
        bias_shape = attn_bias.shape
        extra = grad_bias.dim() - len(bias_shape)
        dims = [i for i in range(grad_bias.dim())
                if i < extra or bias_shape[i - extra] == 1 and grad_bias.shape[i] != 1]
        grad_bias = grad_bias.sum(dims, keepdim=True) if dims else grad_bias
        grad_bias = grad_bias.reshape(bias_shape).to(attn_bias.dtype)
    if squeeze:
        gq, gk, gv = gq.squeeze(0), gk.squeeze(0), gv.squeeze(0)
    return gq, gk, gv, grad_bias


def register(lib: torch.library.Library) -> None:
    lib.impl("_scaled_dot_product_fused_attention_overrideable", fused_attention, "PrivateUse1")
    lib.impl("_scaled_dot_product_fused_attention_overrideable_backward", fused_attention_backward,
             "PrivateUse1")
