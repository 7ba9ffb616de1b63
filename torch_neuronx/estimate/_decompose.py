"""Ops without a cost formula, costed from their decomposition: no fused op is free by accident.

An op that has no FLOP formula and is not a known Vector/Scalar-engine op (pointwise or reduction
tag, or an engine class in the cost registry, _costs.py) may hide matmuls: `aten._transformer_encoder_layer_fwd` (PyTorch's
inference fast path for nn.TransformerEncoderLayer) is two projections, attention and an FFN in
one call. Such an op is re-run on meta tensors (shapes only, nothing real is touched) through a
decomposition, and each ATen op it reaches is costed by `op_estimate` as usual; the op's cost is
the sum of its parts' device times (each part a full HBM round trip: an upper bound on traffic a
fused kernel keeps on chip) plus one launch.

Decompositions, first found wins:
1. a decomposition in the cost registry (`register_cost(op, decompose=True)`): the ones below, for
   fused ops PyTorch ships none for (written with the public functional ops whose semantics the
   fused kernels implement: torch/nn/modules/transformer.py and activation.py take the fast path
   only when it computes the same result), and users';
2. PyTorch's own decomposition table (`torch._decomp.decomposition_table`);
3. the op's CompositeImplicitAutograd kernel (`OpOverload.decompose`).
An op none of these covers stays unmodelled: listed in every report, an error under strict mode.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_flatten, tree_map

from . import _costs as costs

aten = torch.ops.aten


def _heads(x, num_heads):
    """[B, T, E] -> [B, H, T, E/H]"""
    b, t, e = x.shape
    return x.view(b, t, num_heads, e // num_heads).transpose(1, 2)


def _attention_mask(mask):
    if mask is None:
        return None
    # the fast path's masks are boolean "ignore" masks (True = masked); SDPA takes "keep" masks
    return ~mask if mask.dtype == torch.bool else mask


def _mha(query, key, value, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, mask,
         need_weights):
    """In-projection, scaled dot-product attention per head, out-projection (batch first)."""
    if query is key and key is value:
        q, k, v = F.linear(query, qkv_weight, qkv_bias).chunk(3, dim=-1)
    else:
        wq, wk, wv = qkv_weight.chunk(3)
        bq, bk, bv = qkv_bias.chunk(3)
        q, k, v = F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)
    q, k, v = _heads(q, num_heads), _heads(k, num_heads), _heads(v, num_heads)
    m = _attention_mask(mask)
    if need_weights:   # the weights are returned, so the scores are materialised
        scores = q @ k.transpose(-2, -1) / (q.shape[-1] ** 0.5)
        if m is not None:
            scores = scores.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else scores + m
        weights = scores.softmax(-1)
        a = weights @ v
    else:   # the fused attention kernel the virtual core runs (flash attention, one pass)
        a, weights = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, attn_mask=m)[0], None
    b, h, t, d = a.shape
    return F.linear(a.transpose(1, 2).reshape(b, t, h * d), proj_weight, proj_bias), weights


@costs.register_cost(aten._native_multi_head_attention, decompose=True)
def _native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias,
                                 proj_weight, proj_bias, mask=None, need_weights=True,
                                 average_attn_weights=True, mask_type=None):
    out, weights = _mha(query, key, value, num_head, qkv_weight, qkv_bias, proj_weight, proj_bias,
                        mask, need_weights)
    if weights is not None and average_attn_weights:
        weights = weights.mean(1)
    return out, weights


@costs.register_cost(aten._transformer_encoder_layer_fwd, decompose=True)
def _transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
                                   proj_bias, use_gelu, norm_first, eps, norm_weight_1, norm_bias_1,
                                   norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1,
                                   ffn_weight_2, ffn_bias_2, mask=None, mask_type=None):
    def norm(x, w, b):
        return F.layer_norm(x, (embed_dim,), w, b, eps)

    def attn(x):
        return _mha(x, x, x, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, mask, False)[0]

    def ffn(x):
        h = F.linear(x, ffn_weight_1, ffn_bias_1)
        return F.linear(F.gelu(h) if use_gelu else F.relu(h), ffn_weight_2, ffn_bias_2)

    x = src
    if norm_first:
        x = x + attn(norm(x, norm_weight_1, norm_bias_1))
        return x + ffn(norm(x, norm_weight_2, norm_bias_2))
    x = norm(x + attn(x), norm_weight_1, norm_bias_1)
    return norm(x + ffn(x), norm_weight_2, norm_bias_2)


def find(func):
    """The decomposition of `func` (an OpOverload), or None when there is none."""
    found = costs.entry(func)
    if isinstance(found, costs.Decomposition):
        return found.fn
    from torch._decomp import decomposition_table

    fn = decomposition_table.get(func)
    if fn is not None:
        return fn
    if torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CompositeImplicitAutograd"):
        return func.decompose
    return None


@dataclass(frozen=True)
class Parts:
    """The summed cost of a decomposition's ops (launches excluded)."""
    flops: int
    bytes: int
    compute_s: float
    memory_s: float
    seconds: float
    category: str
    engine: str
    ops: int
    unmodelled: tuple      # parts that had no model themselves


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.calls.append((func, args, kwargs or {}, out))
        return out


def _meta(x):
    if isinstance(x, torch.Tensor):
        return torch.empty_strided(tuple(x.shape), tuple(x.stride()), dtype=x.dtype, device="meta")
    return x


def _signature(args, kwargs) -> tuple:
    leaves, spec = tree_flatten((args, kwargs))
    sig = []
    for x in leaves:
        if isinstance(x, torch.Tensor):
            sig.append(("T", tuple(x.shape), tuple(x.stride()), x.dtype))
        else:
            try:
                hash(x)
                sig.append(x)
            except TypeError:
                sig.append(repr(x))
    return (str(spec), tuple(sig))


_cache: dict = {}
_local = threading.local()     # recursion depth: a decomposition may reach another unmodelled op
_MAX_DEPTH = 4


def parts(func, args, kwargs, hw, cost_part) -> Parts | None:
    """The summed cost of `func`'s decomposition on `hw`, each part costed by `cost_part` (ops.op_estimate,
    passed in so that this module does not import its caller), or None when it has none (or it fails)."""
    fn = find(func)
    if fn is None:
        return None
    depth = getattr(_local, "depth", 0)
    if depth >= _MAX_DEPTH:
        return None
    try:
        key = (func, _signature(args, kwargs), hw.name, hw.assumptions)
        hash(key)
    except TypeError:
        key = None
    if key is not None and key in _cache:
        return _cache[key]
    _local.depth = depth + 1
    try:
        with _disable_current_modes(), torch.no_grad():
            margs, mkwargs = tree_map(_meta, (args, kwargs or {}))
            rec = _Recorder()
            with rec:
                fn(*margs, **mkwargs)
            ests = [cost_part(f, a, k, o, hardware=hw, launch_s=0.0) for f, a, k, o in rec.calls]
    except Exception:  # noqa: BLE001 - no decomposition runs on these inputs: the op stays unmodelled
        ests = []
    finally:
        _local.depth = depth
    ests = [e for e in ests if e.bound != "none"]
    if not ests:
        if key is not None:
            _cache[key] = None      # do not try again for every call of the op
        return None
    heaviest = max(ests, key=lambda e: e.seconds)
    flops = sum(e.flops for e in ests)
    result = Parts(flops, sum(e.bytes for e in ests), sum(e.compute_s for e in ests),
                   sum(e.memory_s for e in ests), sum(e.seconds for e in ests),
                   heaviest.category, "tensor" if flops else heaviest.engine, len(ests),
                   tuple(sorted({e.name for e in ests if not e.modelled})))
    if key is not None:
        _cache[key] = result
    return result
