"""Costs users register for their own ops (or to replace the model of an ATen op).

    @torch_neuronx.estimate.register_cost(torch.ops.mylib.scale)
    def _(x, factor, *, out_val=None):
        return torch_neuronx.estimate.Cost(elements=x.numel())

A formula receives the call's arguments (real, fake or meta tensors: read shapes and dtypes only)
and the result as `out_val`, and returns a `Cost`: Tensor-engine FLOPs, Vector-engine element
operations, and optionally the HBM bytes (by default the bytes of the call's tensors, as for any
op). The estimate turns it into time with the same roofline as every other op (estimate/_ops.py).
Registration is checked as `torch.utils.flop_counter.register_flop_formula` checks its registry:
targets must be ops (`torch.ops.ns.op` or one overload of it), an op is registered once, and a bad
formula or a bad result raises an error naming the op.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

import torch
from torch.utils._pytree import tree_flatten

_registry: dict = {}


@dataclass(frozen=True)
class Cost:
    """What one call of an op costs on a NeuronCore."""
    flops: int = 0                  # Tensor-engine (matmul) FLOPs
    elements: int = 0               # Vector-engine element operations (one per element per pass)
    bytes: int | None = None        # HBM bytes read + written; None: the call's tensors
    category: str | None = None     # the report's category; default "matmul" with FLOPs, else "elementwise"

    def __post_init__(self) -> None:
        for name in ("flops", "elements", "bytes"):
            value = getattr(self, name)
            if value is None and name == "bytes":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"Cost({name}={value!r}): give a non-negative int.")


def register_cost(targets, *, replace: bool = False) -> Callable[[Callable], Callable]:
    """Decorator: `fn(*args, out_val=None, **kwargs) -> Cost` is the cost of each op in `targets`
    (an op packet such as `torch.ops.mylib.scale`, one overload such as `torch.ops.aten.mm.default`,
    or a list of them). An op already registered raises unless `replace=True`."""
    def register_fun(fn: Callable) -> Callable:
        if not callable(fn):
            raise TypeError(f"register_cost({targets!r}): decorate a function, not {type(fn).__name__}.")
        _check_signature(fn, targets)
        leaves, _ = tree_flatten(targets)
        if not leaves:
            raise ValueError("register_cost(targets): give at least one op, e.g. torch.ops.mylib.scale.")
        for target in leaves:
            if not isinstance(target, (torch._ops.OpOverloadPacket, torch._ops.OpOverload)):
                raise ValueError(f"register_cost(targets): expected each target to be an op "
                                 f"(torch.ops.mylib.foo or torch.ops.mylib.foo.default), got {target!r} "
                                 f"of type {type(target).__name__}.")
            if target in _registry and not replace:
                raise RuntimeError(f"duplicate cost registration for {target}; pass replace=True to "
                                   f"replace the formula {_registry[target].__qualname__}.")
        for target in leaves:
            _registry[target] = fn
        return fn

    return register_fun


def unregister_cost(target) -> None:
    """Remove the cost registered for `target` (the op is then costed as before)."""
    if target not in _registry:
        raise KeyError(f"no cost is registered for {target!r}")
    del _registry[target]


def registered_cost(func, args, kwargs, out) -> Cost | None:
    """The registered cost of one call of the OpOverload `func`, or None when none is registered."""
    fn = _registry.get(func) or _registry.get(getattr(func, "_overloadpacket", None))
    if fn is None:
        return None
    cost = fn(*args, **(kwargs or {}), out_val=out)
    if isinstance(cost, int) and not isinstance(cost, bool):
        cost = Cost(flops=cost)
    if not isinstance(cost, Cost):
        raise TypeError(f"the cost formula {fn.__qualname__} of {func} returned {cost!r}; return "
                        f"torch_neuronx.estimate.Cost(flops=..., elements=..., bytes=...).")
    return cost


def _check_signature(fn: Callable, targets) -> None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):   # a builtin without a signature: trust it
        return
    if not any(p.name == "out_val" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        raise TypeError(f"register_cost({targets!r}): the formula {fn.__qualname__} must accept the result "
                        f"as the keyword out_val (def f(*args, out_val=None, **kwargs)).")


def stated_bytes(func, args, kwargs, out) -> int | None:
    """The HBM bytes a registered cost of `func` states for this call, or None (no registered cost, or
    one that leaves the bytes to the call's tensors)."""
    if not (_registry.get(func) or _registry.get(getattr(func, "_overloadpacket", None))):
        return None
    return registered_cost(func, args, kwargs, out).bytes
