"""What an ATen op costs: FLOPs (PyTorch's flop_counter registry), bytes, engine, category.

FLOPs come from `torch.utils.flop_counter`'s registry (mm, addmm, bmm, baddbmm, convolution,
SDPA/flash/efficient attention forward and backward, _scaled_mm, ...), extended here, keyed the
same way, for the CPU attention kernels the virtual core runs and the MoE grouped matmuls
(`register_flops`). Ops without a FLOP formula are Vector/Scalar engine work by element count.
"""
from __future__ import annotations

import warnings

import torch
from torch.utils import flop_counter
from torch.utils._pytree import tree_flatten

from . import _aten as aten_schema

aten = torch.ops.aten

_extra_flops: dict = {}


def register_flops(*packets):
    """Decorator: a FLOP formula `f(*args, out_val=None, **kwargs) -> int` for ATen op packets."""
    def wrap(fn):
        for p in packets:
            _extra_flops[p] = fn
        return fn
    return wrap


def _shape(t):
    return tuple(t.shape)


if hasattr(aten, "_scaled_dot_product_flash_attention_for_cpu"):
    @register_flops(aten._scaled_dot_product_flash_attention_for_cpu)
    def _sdpa_cpu(query, key, value, *args, out_val=None, **kwargs):
        return flop_counter.sdpa_flop_count(_shape(query), _shape(key), _shape(value))

    @register_flops(aten._scaled_dot_product_flash_attention_for_cpu_backward)
    def _sdpa_cpu_bw(grad_out, query, key, value, *args, out_val=None, **kwargs):
        return flop_counter.sdpa_backward_flop_count(_shape(grad_out), _shape(query), _shape(key),
                                                     _shape(value))


def _covered(offs, extent: int) -> int:
    """How much of the grouped dimension the groups cover: offs[-1] (offs holds cumulative group
    ends, so the group sizes sum to it). Fake and meta offsets (compiled graphs, the dry-run
    planner) carry no values: then the whole dimension, exact when every row is routed."""
    if offs is None or offs.numel() == 0:
        return extent if offs is None else 0
    if type(offs) is not torch.Tensor or offs.device.type == "meta":
        return extent
    if offs.device.type == "neuron":   # read through the host alias: no op dispatched, no launch
        from .._C import _cpu_alias
        offs = _cpu_alias(offs)
    return min(int(offs[-1]), extent)


def _grouped_mm_flops(mat_a, mat_b, offs) -> int:
    """2 x sum over groups g of m_g x k_g x n_g, for the four operand layouts of _grouped_mm:
    2-D x 3-D (MoE forward, offs split the rows of mat_a), 3-D x 3-D (a batched mm, no offs),
    2-D x 2-D (the weight gradient, offs split K), 3-D x 2-D (offs split the columns of mat_b)."""
    if mat_a.dim() == 2 and mat_b.dim() == 3:
        return 2 * _covered(offs, mat_a.shape[0]) * mat_a.shape[1] * mat_b.shape[2]
    if mat_a.dim() == 3 and mat_b.dim() == 3:
        return 2 * mat_a.shape[0] * mat_a.shape[1] * mat_a.shape[2] * mat_b.shape[2]
    if mat_a.dim() == 2 and mat_b.dim() == 2:
        return 2 * mat_a.shape[0] * _covered(offs, mat_a.shape[1]) * mat_b.shape[1]
    return 2 * mat_a.shape[1] * mat_a.shape[2] * _covered(offs, mat_b.shape[1])


# torch's flop_counter has no formula for the MoE expert matmuls (2.13 to 2.15)
@register_flops(aten._grouped_mm)
def _grouped_mm(mat_a, mat_b, offs=None, *args, out_val=None, **kwargs):
    return _grouped_mm_flops(mat_a, mat_b, offs)


@register_flops(aten._scaled_grouped_mm)
def _scaled_grouped_mm(mat_a, mat_b, scale_a, scale_b, offs=None, *args, out_val=None, **kwargs):
    return _grouped_mm_flops(mat_a, mat_b, offs)


def flops(func, args, kwargs, out) -> int | None:
    """FLOPs of one call, or None when PyTorch has no formula for the op."""
    packet = func._overloadpacket
    fn = _extra_flops.get(packet) or flop_counter.flop_registry.get(packet)
    if fn is None:
        return None
    return int(fn(*args, **(kwargs or {}), out_val=out))


ATTENTION = {"_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward",
             "_scaled_dot_product_efficient_attention", "_scaled_dot_product_efficient_attention_backward",
             "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_cudnn_attention_backward",
             "_flash_attention_forward", "_flash_attention_backward", "_efficient_attention_forward",
             "_efficient_attention_backward", "_scaled_dot_product_flash_attention_for_cpu",
             "_scaled_dot_product_flash_attention_for_cpu_backward", "flex_attention",
             "flex_attention_backward"}
# ScalarE (activation engine) work: transcendentals (docs/hardware-sources.md A6)
SCALAR = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "tanh", "sigmoid", "gelu", "silu",
          "erf", "erfc", "softplus", "mish", "sin", "cos", "tan", "asin", "acos", "atan", "sqrt",
          "rsqrt", "reciprocal", "pow", "gelu_backward", "silu_backward", "sigmoid_backward",
          "tanh_backward", "elu", "selu", "logit", "_softmax", "_log_softmax", "_softmax_backward_data",
          "_log_softmax_backward_data"}
# Known vector-engine ops that have no pointwise/reduction tag: (category, passes over elements)
VECTOR = {
    "native_layer_norm": ("reduction", 3), "native_layer_norm_backward": ("reduction", 4),
    "_fused_rms_norm": ("reduction", 3), "_fused_rms_norm_backward": ("reduction", 4),
    "native_group_norm": ("reduction", 3), "native_group_norm_backward": ("reduction", 4),
    "_native_batch_norm_legit": ("reduction", 3), "native_batch_norm_backward": ("reduction", 4),
    "_softmax": ("reduction", 3), "_log_softmax": ("reduction", 3),
    "_softmax_backward_data": ("reduction", 2), "_log_softmax_backward_data": ("reduction", 2),
    "embedding": ("copy", 1), "embedding_dense_backward": ("copy", 1), "index_select": ("copy", 1),
    "gather": ("copy", 1), "scatter": ("copy", 1), "scatter_add": ("elementwise", 1),
    "index_add": ("elementwise", 1), "index_put": ("copy", 1), "index": ("copy", 1),
    "index_copy": ("copy", 1),   # a static KV cache's update: a DMA of the new rows
    "cat": ("copy", 1), "stack": ("copy", 1), "copy": ("copy", 1), "_to_copy": ("copy", 1),
    "clone": ("copy", 1), "contiguous": ("copy", 1), "fill": ("copy", 1), "zero": ("copy", 1),
    "constant_pad_nd": ("copy", 1), "masked_fill": ("elementwise", 1), "where": ("elementwise", 2),
    "nll_loss_forward": ("reduction", 1), "nll_loss_backward": ("elementwise", 1),
    "cumsum": ("reduction", 1), "topk": ("reduction", 2), "sort": ("reduction", 4),
    "argmax": ("reduction", 1), "argmin": ("reduction", 1), "max": ("reduction", 1),
    "min": ("reduction", 1), "triu": ("elementwise", 1), "tril": ("elementwise", 1),
    "arange": ("copy", 1), "full": ("copy", 1), "scalar_tensor": ("copy", 1),
    "bernoulli": ("elementwise", 1), "native_dropout": ("elementwise", 2),
    "native_dropout_backward": ("elementwise", 2), "uniform": ("elementwise", 1),
    "normal": ("elementwise", 1), "random": ("elementwise", 1), "rand": ("elementwise", 1),
    "randn": ("elementwise", 1), "repeat": ("copy", 1), "roll": ("copy", 1), "flip": ("copy", 1),
    "_unsafe_index": ("copy", 1), "select_backward": ("copy", 1), "slice_backward": ("copy", 1),
    "nonzero": ("copy", 1), "ones_like": ("copy", 1), "zeros_like": ("copy", 1),
    "full_like": ("copy", 1), "ones": ("copy", 1), "zeros": ("copy", 1), "rand_like": ("elementwise", 1),
    "randn_like": ("elementwise", 1), "new_zeros": ("copy", 1), "new_ones": ("copy", 1),
    "new_full": ("copy", 1), "lerp": ("elementwise", 2), "addcmul": ("elementwise", 2),
    "addcdiv": ("elementwise", 2), "_foreach_add": ("elementwise", 2), "_foreach_mul": ("elementwise", 2),
    "linalg_vector_norm": ("reduction", 1), "var_mean": ("reduction", 2), "var": ("reduction", 2),
    "std": ("reduction", 2), "logsumexp": ("reduction", 2), "masked_scatter": ("copy", 1),
    "native_dropout": ("elementwise", 2),
    # FSDP2's copy-in/out of flat parameter and gradient buffers: data movement
    "chunk_cat": ("copy", 1), "all_gather_copy_in": ("copy", 1), "split_with_sizes_copy": ("copy", 1),
}
# Indexed reads: only the gathered rows of the source (the first argument) move, not the table
# (an embedding lookup reads batch x hidden, not vocab x hidden).
GATHER = {"embedding", "index_select", "gather", "index", "_unsafe_index"}
# Indexed writes in place: only the written rows move (a static KV cache's index_copy_ writes the
# new tokens, not the cache).
SCATTER_INPLACE = {"index_copy_", "index_put_", "scatter_", "scatter_add_", "index_add_", "masked_scatter_",
                   "_index_put_impl_", "index_fill_", "masked_fill_"}


def moved_bytes(func, ins, outs) -> int | None:
    """HBM bytes of an indexed read or in-place indexed write (None: not one of those)."""
    name = func._overloadpacket.__name__
    if name in GATHER and ins and outs:
        # the rows read equal the output; the index tensors are read once
        return sum(touched_bytes(t) for t in ins[1:]) + 2 * sum(touched_bytes(t) for t in outs)
    if name in SCATTER_INPLACE and ins:
        # read the index and the values, write as many bytes into the destination
        rest = ins[1:]
        values = max((touched_bytes(t) for t in rest if t.is_floating_point() or t.dtype == ins[0].dtype),
                     default=0)
        return sum(touched_bytes(t) for t in rest) + values
    return None


# metadata-only ops: no device work at all
FREE = {"empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided", "detach",
        "lift_fresh", "alias", "_local_scalar_dense", "sym_size", "sym_stride", "sym_numel",
        "set_", "resize_", "_has_compatible_shallow_copy_type", "is_same_size", "record_stream",
        "_resize_output", "_unsafe_view", "_reshape_alias", "equal"}
NO_DEVICE_NAMESPACES = {"c10d", "_c10d_functional", "_c10d_functional_autograd", "_dtensor", "prim",
                        "profiler", "_nested_tensor"}


def op_name(func) -> str:
    return func._overloadpacket._qualified_op_name.replace("::", ".")


def is_view(func) -> bool:
    """Free on the device: a view (estimate/_aten.py) or an op that only changes metadata (FREE)."""
    return aten_schema.is_view(func) or func._overloadpacket.__name__ in FREE


def tensors(tree):
    leaves, _ = tree_flatten(tree)
    return [t for t in leaves if isinstance(t, torch.Tensor)]


def touched_bytes(t: torch.Tensor) -> int:
    """Bytes a kernel reads or writes for `t`: broadcast (stride-0) dimensions are read once."""
    n = 1
    for size, stride in zip(t.shape, t.stride()):
        if stride != 0:
            n *= size
    return n * t.element_size()


def classify(func) -> tuple[str, str, int, bool]:
    """(category, engine, passes over the elements, modelled) of an op without a FLOP formula."""
    name = func._overloadpacket.__name__.rstrip("_")
    if name.startswith("_foreach_"):
        # one elementwise op over every tensor of its lists (the optimizer's multi-tensor steps)
        base = name[len("_foreach_"):]
        engine = "scalar" if base in SCALAR else "vector"
        return "elementwise", engine, VECTOR.get(base, ("elementwise", 1))[1], True
    if name in VECTOR:
        category, passes = VECTOR[name]
        engine = "scalar" if name in SCALAR else ("dma" if category == "copy" else "vector")
        return category, engine, passes, True
    tags = getattr(func, "tags", ())
    if torch.Tag.reduction in tags:
        return "reduction", "vector", 1, True
    if torch.Tag.pointwise in tags:
        return "elementwise", ("scalar" if name in SCALAR else "vector"), 1, True
    return "elementwise", "vector", 1, False


_warned: set[str] = set()


class UnmodelledOpError(RuntimeError):
    """Under a strict estimate (`estimate(strict=True)`, TORCH_NEURONX_ESTIMATE_STRICT=1), an op
    the cost model has no formula, engine class or decomposition for."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"torch_neuronx.estimate(strict=True): no cost model for {name} (no FLOP formula, not a "
            "known Vector/Scalar-engine op, no decomposition). Register its cost with "
            "torch_neuronx.estimate.register_cost (or a FLOP formula with register_flops), or a decomposition with torch_neuronx.estimate."
            "decompose.reference, or estimate without strict (it is then listed in the report and "
            "counted as a Vector-engine op).")
        self.op = name


def warn_unmodelled(name: str) -> None:
    """An op with no model says so once per process; it is then counted as a Vector-engine op."""
    if name in _warned:
        return
    _warned.add(name)
    warnings.warn(f"torch_neuronx.estimate: no cost model for {name}; counted as a Vector-engine "
                  "op by element count (register its cost with torch_neuronx.estimate."
                  "register_cost to refine it)", RuntimeWarning, stacklevel=3)
