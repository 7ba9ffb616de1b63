"""What an ATen op costs: FLOPs (PyTorch's flop_counter registry), bytes, engine, category.

FLOPs come from `torch.utils.flop_counter`'s registry (mm, addmm, bmm, baddbmm, convolution,
SDPA/flash/efficient attention forward and backward, _scaled_mm, ...); the one cost registry
(_costs.py, filled by _builtin_costs.py and users) adds formulas PyTorch lacks and the engine
class of ops without a formula. Other ops are Vector-engine work by element count.
"""
from __future__ import annotations

import warnings

import torch
from torch.utils import flop_counter
from torch.utils._pytree import tree_flatten

from . import aten_schema, _costs as costs

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


def grouped_mm_flops(mat_a, mat_b, offs) -> int:
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


def flops(func, args, kwargs, out) -> int | None:
    """FLOPs of one call by PyTorch's formula, or None when PyTorch has none for the op."""
    fn = flop_counter.flop_registry.get(func._overloadpacket)
    if fn is None:
        return None
    return int(fn(*args, **(kwargs or {}), out_val=out))


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


NO_DEVICE_NAMESPACES = {"c10d", "_c10d_functional", "_c10d_functional_autograd", "_dtensor", "prim",
                        "profiler", "_nested_tensor"}


def op_name(func) -> str:
    return func._overloadpacket._qualified_op_name.replace("::", ".")


def is_view(func) -> bool:
    """Free on the device: a view (estimate/aten_schema.py) or an op registered as metadata only."""
    if aten_schema.is_view(func):
        return True
    found = costs.entry(func)
    return isinstance(found, costs.Engine) and found.engine == "none"


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


def _engine_class(found) -> costs.Engine | None:
    return found if isinstance(found, costs.Engine) and found.engine != "none" else None


def classify(func) -> tuple[str, str, int, bool]:
    """(category, engine, passes over the elements, modelled) of an op without a FLOP formula."""
    short = func._overloadpacket.__name__.rstrip("_")
    if short.startswith("_foreach_"):
        # one elementwise op over every tensor of its lists (the optimizer's multi-tensor steps),
        # on the engine of the op it applies, as many passes
        namespace = func._overloadpacket._qualified_op_name.split("::")[0]
        base = _engine_class(costs.entry_named(f"{namespace}::{short[len('_foreach_'):]}"))
        return ("elementwise", "scalar" if base and base.engine == "scalar" else "vector",
                base.passes if base else 1, True)
    found = _engine_class(costs.entry(func, in_place_of=True))
    if found is not None:
        return found.category, found.engine, found.passes, True
    tags = getattr(func, "tags", ())
    if torch.Tag.reduction in tags:
        return "reduction", "vector", 1, True
    if torch.Tag.pointwise in tags:
        return "elementwise", "vector", 1, True
    return "elementwise", "vector", 1, False


_warned: set[str] = set()


class UnmodelledOpError(RuntimeError):
    """Under a strict estimate (`estimate(strict=True)`, TORCH_NEURONX_ESTIMATE_STRICT=1), an op
    the cost model has no formula, engine class or decomposition for."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"torch_neuronx.estimate(strict=True): no cost model for {name} (no FLOP formula, not a "
            "known Vector/Scalar-engine op, no decomposition). Register its cost, engine class or "
            "decomposition with torch_neuronx.estimate.register_cost, or estimate without strict (it is "
            "then listed in the report and counted as a Vector-engine op).")
        self.op = name


def warn_unmodelled(name: str) -> None:
    """An op with no model says so once per process; it is then counted as a Vector-engine op."""
    if name in _warned:
        return
    _warned.add(name)
    warnings.warn(f"torch_neuronx.estimate: no cost model for {name}; counted as a Vector-engine "
                  "op by element count (register its cost with torch_neuronx.estimate."
                  "register_cost to refine it)", RuntimeWarning, stacklevel=3)
