"""The cost model's own entries in the one cost registry (_costs.py), registered as a user's are.

- FLOP formulas PyTorch's `torch.utils.flop_counter` lacks: the CPU flash-attention kernels the
  virtual core runs and the MoE grouped matmuls; and the attention ops of PyTorch's registry,
  charged as "attention" rather than "matmul".
- Engine classes: Vector/Scalar-engine ops without a pointwise or reduction tag (with their
  passes over the elements), transcendentals on ScalarE (docs/hardware-sources.md A6), data
  movement on the DMA engines, and metadata-only ops (free).
- Decompositions of PyTorch's fused inference fast paths live in _decompose.py, registered there
  (imported here, so that every entry is in before a user registers one).
"""
from __future__ import annotations

import torch
from torch.utils import flop_counter

from . import _decompose  # noqa: F401 - registers its decompositions of fused ops
from ._costs import Cost, Engine, register_cost
from ._formulas import grouped_mm_flops

aten = torch.ops.aten


def _shape(t):
    return tuple(t.shape)


# ---- FLOP formulas -------------------------------------------------------------------------------
if hasattr(aten, "_scaled_dot_product_flash_attention_for_cpu"):
    @register_cost(aten._scaled_dot_product_flash_attention_for_cpu)
    def _sdpa_cpu(query, key, value, *args, out_val=None, **kwargs):
        return Cost(flops=flop_counter.sdpa_flop_count(_shape(query), _shape(key), _shape(value)),
                    category="attention")

    @register_cost(aten._scaled_dot_product_flash_attention_for_cpu_backward)
    def _sdpa_cpu_bw(grad_out, query, key, value, *args, out_val=None, **kwargs):
        return Cost(flops=flop_counter.sdpa_backward_flop_count(_shape(grad_out), _shape(query), _shape(key),
                                                                _shape(value)), category="attention")


# torch's flop_counter has no formula for the MoE expert matmuls (2.13 to 2.15)
@register_cost(aten._grouped_mm)
def _grouped_mm(mat_a, mat_b, offs=None, *args, out_val=None, **kwargs):
    return Cost(flops=grouped_mm_flops(mat_a, mat_b, offs))


@register_cost(aten._scaled_grouped_mm)
def _scaled_grouped_mm(mat_a, mat_b, scale_a, scale_b, offs=None, *args, out_val=None, **kwargs):
    return Cost(flops=grouped_mm_flops(mat_a, mat_b, offs))


# FP8 matmuls: PyTorch's FLOPs (2 x M x K x N). With float8_e8m0fnu block scales (OCP MXFP8) they
# run at the TensorE's MXFP8 rate (trn3 only: neuron_hardware), else at the operands' FP8 rate.
_E8M0 = torch.float8_e8m0fnu


def _mm_flops(a, b) -> int:
    return 2 * a.shape[0] * a.shape[1] * b.shape[1]


@register_cost(aten._scaled_mm)
def _scaled_mm(mat_a, mat_b, scale_a, scale_b, *args, out_val=None, **kwargs):
    mx = _E8M0 in (scale_a.dtype, scale_b.dtype)
    return Cost(flops=_mm_flops(mat_a, mat_b), tensor_rate="mxfp8" if mx else None)


@register_cost(aten._scaled_mm_v2)
def _scaled_mm_v2(mat_a, mat_b, scale_a, recipe_a, swizzle_a, scale_b, *args, out_val=None, **kwargs):
    mx = any(s.dtype == _E8M0 for s in list(scale_a) + list(scale_b))
    return Cost(flops=_mm_flops(mat_a, mat_b), tensor_rate="mxfp8" if mx else None)


def _attention(packet):
    """PyTorch's own FLOP formula of an attention op, charged as attention."""
    formula = flop_counter.flop_registry[packet]

    def cost(*args, out_val=None, **kwargs):
        return Cost(flops=int(formula(*args, out_val=out_val, **kwargs)), category="attention")

    cost.__qualname__ = f"attention({packet._qualified_op_name})"
    return cost


for _name in ("_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward",
              "_scaled_dot_product_efficient_attention", "_scaled_dot_product_efficient_attention_backward",
              "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_cudnn_attention_backward",
              "_flash_attention_forward", "_flash_attention_backward", "_efficient_attention_forward",
              "_efficient_attention_backward"):
    _packet = getattr(aten, _name, None)
    if _packet is not None and _packet in flop_counter.flop_registry:
        register_cost(_packet)(_attention(_packet))


# ---- engine classes ------------------------------------------------------------------------------
def _engines(category: str, engine: str, passes: int, names: str, namespace: str = "aten") -> None:
    register_cost([f"{namespace}::{n}" for n in names.split()], Engine(engine, category, passes))


# ScalarE (activation engine) work: transcendentals (docs/hardware-sources.md A6)
_engines("elementwise", "scalar", 1, "exp exp2 expm1 log log2 log10 log1p tanh sigmoid gelu silu erf erfc softplus "
         "mish sin cos tan asin acos atan sqrt rsqrt reciprocal pow gelu_backward silu_backward sigmoid_backward "
         "tanh_backward elu selu logit")
# softmax: a reduction on the Vector engine whose exponentials run on ScalarE
_engines("reduction", "scalar", 3, "_softmax _log_softmax")
_engines("reduction", "scalar", 2, "_softmax_backward_data _log_softmax_backward_data")
# normalizations and reductions without a reduction tag: (passes over the elements)
_engines("reduction", "vector", 3, "native_layer_norm _fused_rms_norm native_group_norm _native_batch_norm_legit")
_engines("reduction", "vector", 4, "native_layer_norm_backward _fused_rms_norm_backward native_group_norm_backward "
         "native_batch_norm_backward sort")
_engines("reduction", "vector", 1, "nll_loss_forward cumsum argmax argmin max min linalg_vector_norm")
_engines("reduction", "vector", 2, "topk var_mean var std logsumexp")
_engines("elementwise", "vector", 1, "scatter_add index_add masked_fill nll_loss_backward triu tril bernoulli "
         "uniform normal random rand randn rand_like randn_like")
_engines("elementwise", "vector", 2, "where native_dropout native_dropout_backward lerp addcmul addcdiv")
# data movement: HBM traffic only (index_copy: a static KV cache's update, a DMA of the new rows)
_engines("copy", "dma", 1, "embedding embedding_dense_backward index_select gather scatter index_put index "
         "index_copy cat stack copy _to_copy clone contiguous fill zero constant_pad_nd arange full "
         "scalar_tensor repeat roll flip _unsafe_index select_backward slice_backward nonzero ones_like "
         "zeros_like full_like ones zeros new_zeros new_ones new_full masked_scatter split_with_sizes_copy")
# FSDP2's copy-in/out of flat parameter and gradient buffers (torch.distributed.fsdp defines these ops)
_engines("copy", "dma", 1, "chunk_cat all_gather_copy_in split_with_sizes_copy copy_", namespace="fsdp")
# metadata only: no device work at all
_engines("view", "none", 1, "empty empty_strided empty_like new_empty new_empty_strided detach lift_fresh alias "
         "_local_scalar_dense sym_size sym_stride sym_numel set_ resize_ _has_compatible_shallow_copy_type "
         "is_same_size record_stream _resize_output _unsafe_view _reshape_alias equal")
