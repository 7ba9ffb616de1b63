"""Run an op a second time with some dtypes replaced (float64 -> float32,
integers -> float32, fp16/bf16/fp8 -> float32) on copies of its inputs.

The emulations run the op as the CPU kernel does first, which gives the
results their dtypes, shapes and aliasing (in-place, out=, multiple outputs),
then overwrite those results with what Trainium's datapath computes. The
inputs an op mutates are copied before it runs, so the second run sees the
values the first one saw.
"""
from __future__ import annotations

import torch

from ..estimate.aten_schema import written_arguments

PLAIN = (torch.Tensor, torch.nn.Parameter)


def is_plain_neuron(t) -> bool:
    # Fake, functional and other subclass tensors belong to compilers: skip them.
    return type(t) in PLAIN and t.device.type == "neuron"


def snapshot_mutated(func, args, kwargs):
    """Copies of the tensors `func` will write, taken before it runs."""
    pos, kw = written_arguments(func)
    if not pos and not kw:
        return None
    snap_args = list(args)
    snap_kwargs = dict(kwargs)
    for i in pos:
        if i < len(snap_args):
            snap_args[i] = _clone(snap_args[i])
    for name in kw:
        if name in snap_kwargs:
            snap_kwargs[name] = _clone(snap_kwargs[name])
    return tuple(snap_args), snap_kwargs


def _clone(value):
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(v) for v in value)
    return value


def cast_tree(value, cast: dict):
    """`value` with every plain neuron tensor of a dtype in `cast` converted."""
    if isinstance(value, torch.Tensor):
        if is_plain_neuron(value) and value.dtype in cast:
            return value.to(cast[value.dtype])
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(cast_tree(v, cast) for v in value)
    if isinstance(value, torch.dtype):
        return cast.get(value, value)
    return value


# Arguments that address elements rather than hold values: never converted.
_ADDRESSES = frozenset({"index", "indices", "offsets", "per_sample_weights_index"})


def run_cast(func, args, kwargs, cast: dict):
    """func(*args, **kwargs) with value tensors and dtype arguments converted by `cast`."""
    names = [a.name for a in func._schema.arguments]
    new_args = tuple(a if i < len(names) and names[i] in _ADDRESSES else cast_tree(a, cast)
                     for i, a in enumerate(args))
    new_kwargs = {k: v if k in _ADDRESSES else cast_tree(v, cast) for k, v in kwargs.items()}
    return func(*new_args, **new_kwargs)


def flat_tensors(out) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in flat_tensors(o)]
    return []


def neuron_outputs(func, args, kwargs, out) -> list:
    """The tensors an op produced or wrote, in a stable order."""
    tensors = [t for t in flat_tensors(out) if is_plain_neuron(t)]
    if not tensors:
        pos, kw = written_arguments(func)
        for i in pos:
            if i < len(args):
                tensors += [t for t in flat_tensors(args[i]) if is_plain_neuron(t)]
        for name in kw:
            tensors += [t for t in flat_tensors(kwargs.get(name)) if is_plain_neuron(t)]
    return tensors
