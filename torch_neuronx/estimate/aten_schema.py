"""What an ATen op's schema and a tensor's storage say, read one way for the cost model, the dry-run
planner and the numerics emulation: storage bytes, whether an op is a view, which arguments it writes.

They live in the cost model, the lowest layer that needs them; the planner and numerics import them
from here.
"""
from __future__ import annotations

import torch


def storage_bytes(t: torch.Tensor) -> int:
    """Bytes of the storage behind `t` (a view counts its whole base), as the allocator holds them."""
    try:
        return t.untyped_storage().nbytes()
    except (RuntimeError, NotImplementedError):   # sparse / nested: no plain storage
        return t.numel() * t.element_size()


def is_view(func) -> bool:
    """The op's results alias an input and it writes none (transpose, view, split, detach, ...): it
    computes nothing. Reads the schema's alias annotations, `Tensor(a)` without `!`."""
    schema = getattr(func, "_schema", None)   # None: a higher-order operator, not an ATen op
    if schema is None or schema.is_mutable:
        return False
    return any(r.alias_info is not None for r in schema.returns)


def written_arguments(func) -> tuple[list[int], list[str]]:
    """Positional indices and keyword-only names of the arguments `func` writes (`Tensor(a!)`:
    in-place `self`, `out=`), cached on the op."""
    cached = getattr(func, "_neuron_mutated", None)
    if cached is None:
        pos, kw = [], []
        for i, arg in enumerate(func._schema.arguments):
            if arg.alias_info is not None and arg.alias_info.is_write:
                (kw if arg.kwarg_only else pos).append(i if not arg.kwarg_only else arg.name)
        cached = (pos, kw)
        try:
            func._neuron_mutated = cached
        except AttributeError:
            pass
    return cached


def written_tensors(func, args, kwargs) -> list[torch.Tensor]:
    """The tensors of one call that `func` writes (an argument given by keyword included)."""
    out = []
    for i, a in enumerate(func._schema.arguments):
        if a.alias_info is None or not a.alias_info.is_write:
            continue
        v = args[i] if i < len(args) else kwargs.get(a.name)
        for t in (v if isinstance(v, (list, tuple)) else [v]):
            if isinstance(t, torch.Tensor):
                out.append(t)
    return out
