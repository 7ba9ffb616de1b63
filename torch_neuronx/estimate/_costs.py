"""The one registry of what an op costs: the built-in models (_builtin_costs.py) and users' alike.

    @torch_neuronx.estimate.register_cost(torch.ops.mylib.scale)
    def _(x, factor, *, out_val=None):
        return torch_neuronx.estimate.Cost(elements=x.numel())

An op's entry is one of three kinds:
- a formula (`register_cost(ops)(fn)`): `fn` receives the call's arguments (real, fake or meta
  tensors: read shapes and dtypes only) and the result as `out_val`, and returns a `Cost`:
  Tensor-engine FLOPs, Vector-engine element operations, optionally the HBM bytes (by default the
  bytes of the call's tensors, as for any op);
- an engine class (`register_cost(ops, Engine("vector", "reduction", passes=3))`): no formula, the
  op is `passes` passes over its largest tensor's elements on that engine ("dma": HBM traffic only;
  "none": metadata only, free). An in-place variant (`aten.fill_`) uses its op's class (`aten.fill`);
- a decomposition (`register_cost(ops, decompose=True)(fn)`, `fn` with the op's signature): the
  op costs what the ATen ops `fn` reaches cost, plus one launch (_decompose.py).

The estimate turns each into time with the same roofline as every other op (estimate/_ops.py).
Registration is checked as `torch.utils.flop_counter.register_flop_formula` checks its registry:
targets must be ops (`torch.ops.ns.op`, one overload of it, or its qualified name "ns::op" for an
op defined later, as torch.library names ops), an op is registered once (`replace=True` replaces),
and a bad formula or a bad result raises an error naming the op.
"""
from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import Callable

import torch
from torch.utils._pytree import tree_flatten

ENGINES = ("vector", "scalar", "dma", "none")

_registry: dict = {}   # qualified op name ("aten::mm" or "aten::mm.default") -> Formula | Engine | Decomposition
_QUALIFIED = re.compile(r"^[A-Za-z_]\w*::[A-Za-z_]\w*(\.[A-Za-z_]\w*)?$")


@dataclass(frozen=True)
class Cost:
    """What one call of an op costs on a NeuronCore."""
    flops: int = 0                  # Tensor-engine (matmul) FLOPs
    elements: int = 0               # Vector-engine element operations (one per element per pass)
    bytes: int | None = None        # HBM bytes read + written; None: the call's tensors
    category: str | None = None     # the report's category; default "matmul" with FLOPs, else "elementwise"
    # the TensorE rate the FLOPs run at, a name of neuron_hardware's table ("mxfp8"); None: the
    # first tensor's dtype (block-scaled formats have no torch dtype of their own)
    tensor_rate: str | None = None

    def __post_init__(self) -> None:
        if self.tensor_rate is not None and (not isinstance(self.tensor_rate, str) or not self.tensor_rate):
            raise ValueError(f"Cost(tensor_rate={self.tensor_rate!r}): give a rate name such as 'mxfp8', or None.")
        for name in ("flops", "elements", "bytes"):
            value = getattr(self, name)
            if value is None and name == "bytes":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"Cost({name}={value!r}): give a non-negative int.")


@dataclass(frozen=True)
class Engine:
    """An op with no formula that is `passes` passes over its elements on one engine."""
    engine: str                     # "vector" | "scalar" (ScalarE: transcendentals) | "dma" | "none"
    category: str                   # the report's category: "elementwise", "reduction", "copy", "view"
    passes: int = 1

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"Engine(engine={self.engine!r}): choose one of {ENGINES}.")
        if not isinstance(self.category, str) or not self.category:
            raise ValueError(f"Engine(category={self.category!r}): name the report's category, e.g. 'reduction'.")
        if isinstance(self.passes, bool) or not isinstance(self.passes, int) or self.passes < 1:
            raise ValueError(f"Engine(passes={self.passes!r}): give a positive int (passes over the elements).")


@dataclass(frozen=True)
class Formula:
    fn: Callable


@dataclass(frozen=True)
class Decomposition:
    fn: Callable


def register_cost(targets, engine: Engine | None = None, *, replace: bool = False, decompose: bool = False):
    """Register what each op of `targets` costs (an op packet such as `torch.ops.mylib.scale`, one
    overload such as `torch.ops.aten.mm.default`, a qualified name "mylib::scale", or a list of them).

    - `register_cost(ops)(fn)`: `fn(*args, out_val=None, **kwargs) -> Cost` (a decorator);
    - `register_cost(ops, Engine(...))`: an engine class, registered at once (returns the Engine);
    - `register_cost(ops, decompose=True)(fn)`: `fn` computes the op with other ops (a decorator).
    An op already registered raises unless `replace=True`."""
    keys = _keys(targets)
    if engine is not None:
        if not isinstance(engine, Engine) or decompose:
            raise TypeError(f"register_cost({targets!r}, {engine!r}): the second argument is an "
                            f"Engine(engine, category, passes) and takes no decompose=True.")
        _store(keys, engine, replace)
        return engine

    def register_fun(fn: Callable) -> Callable:
        if not callable(fn):
            raise TypeError(f"register_cost({targets!r}): decorate a function, not {type(fn).__name__}.")
        if not decompose:
            _check_signature(fn, targets)
        _store(keys, Decomposition(fn) if decompose else Formula(fn), replace)
        return fn

    return register_fun


def unregister_cost(target) -> None:
    """Remove the cost registered for `target` (the op is then costed as before)."""
    (key,) = _keys(target)
    if key not in _registry:
        raise KeyError(f"no cost is registered for {target!r}")
    del _registry[key]


def entry(func, *, in_place_of: bool = False):
    """What is registered for the OpOverload `func` (its overload first, then its op), or None;
    `in_place_of`: also the entry of the op an in-place variant (trailing `_`) belongs to."""
    packet = func._overloadpacket
    name = packet._qualified_op_name
    found = _registry.get(f"{name}.{func._overloadname}") or _registry.get(name)
    if found is None and in_place_of and name.endswith("_") and not name.endswith("__"):
        found = _registry.get(name.rstrip("_"))
    return found


def entry_named(qualified: str):
    """What is registered for the op named "ns::op", or None."""
    return _registry.get(qualified)


def registered_cost(func, args, kwargs, out) -> Cost | None:
    """The cost a formula gives one call of the OpOverload `func`, or None when `func` has no formula."""
    found = entry(func)
    if not isinstance(found, Formula):
        return None
    cost = found.fn(*args, **(kwargs or {}), out_val=out)
    if isinstance(cost, int) and not isinstance(cost, bool):
        cost = Cost(flops=cost)
    if not isinstance(cost, Cost):
        raise TypeError(f"the cost formula {found.fn.__qualname__} of {func} returned {cost!r}; return "
                        f"torch_neuronx.estimate.Cost(flops=..., elements=..., bytes=...).")
    return cost


def _keys(targets) -> list[str]:
    leaves, _ = tree_flatten(targets)
    if not leaves:
        raise ValueError("register_cost(targets): give at least one op, e.g. torch.ops.mylib.scale.")
    keys = []
    for target in leaves:
        if isinstance(target, torch._ops.OpOverloadPacket):
            keys.append(target._qualified_op_name)
        elif isinstance(target, torch._ops.OpOverload):
            keys.append(f"{target._overloadpacket._qualified_op_name}.{target._overloadname}")
        elif isinstance(target, str) and _QUALIFIED.match(target):
            keys.append(target)
        else:
            raise ValueError(f"register_cost(targets): expected each target to be an op (torch.ops.mylib.foo, "
                             f"torch.ops.mylib.foo.default or its name 'mylib::foo'), got {target!r} of type "
                             f"{type(target).__name__}.")
    return keys


def _store(keys: list[str], value, replace: bool) -> None:
    for key in keys:
        if key in _registry and not replace:
            raise RuntimeError(f"duplicate cost registration for {key.replace('::', '.')}; pass replace=True to "
                               f"replace {_describe(_registry[key])}.")
    for key in keys:
        _registry[key] = value


def _describe(value) -> str:
    if isinstance(value, Engine):
        return f"its engine class {value}"
    kind = "decomposition" if isinstance(value, Decomposition) else "formula"
    return f"the {kind} {value.fn.__qualname__}"


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
    if not isinstance(entry(func), Formula):
        return None
    return registered_cost(func, args, kwargs, out).bytes
