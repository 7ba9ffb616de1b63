"""Hooks through which the layers above the compiler change or watch how graphs compile.

The compiler must not import the cost model, the planner or numerics (docs/architecture.md), yet
each of them changes what a compiled graph is or does. So the compiler offers the four hooks below
and each of those layers registers into them when it installs; the compiler reads only this file.
Importing it is free (it imports nothing), so a layer may register at startup. Who registers into
which hook, and when: docs/architecture.md, "Hooks".
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, ContextManager, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Named entries kept in registration order. Registering a name again replaces its entry in
    place (a layer that installs twice registers once), so the order, and with it a cache key
    built from the entries, does not depend on how often a layer installed."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._entries: dict[str, T] = {}
        self._snapshot: tuple[T, ...] = ()   # read on every compile without taking the lock

    def register(self, name: str, entry: T) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{self.name}.register(name={name!r}): name must be a non-empty string "
                             "naming the layer that registers")
        if not callable(entry):
            raise TypeError(f"{self.name}.register({name!r}, entry={entry!r}): entry must be callable")
        with self._lock:
            self._entries[name] = entry
            self._snapshot = tuple(self._entries.values())

    def unregister(self, name: str) -> None:
        with self._lock:
            self._entries.pop(name, None)
            self._snapshot = tuple(self._entries.values())

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def entries(self) -> tuple[T, ...]:
        return self._snapshot


# Why: check/trainium numerics and the strict op check act on each ATen op in a dispatch mode, and
# Inductor's fused C++ kernels would run past it. While any predicate is true, a graph compiles to
# AOTAutograd's graphs run as Python, so each op goes through the modes as in eager. A predicate
# that can change within a process must come with a cache key field that changes with it, or the
# memory cache serves a program compiled the other way (numerics keys its mode).
op_by_op: Registry[Callable[[], bool]] = Registry("torch_neuronx.compiler.hooks.op_by_op")

# Why: settings of a higher layer (the numerics mode and its options) change what a compiled
# program computes, so a program compiled under one setting must not serve another. The repr of
# each function's tuple joins the memory-cache key, in registration order.
cache_key_fields: Registry[Callable[[], tuple]] = Registry("torch_neuronx.compiler.hooks.cache_key_fields")

# Why: the cost model counts each call of a compiled graph as one fused program, and neuron-top
# counts compiled graphs per core. Each observer wraps the compiled callable (outermost last); the
# wrapper decides at each call whether to observe, so graphs compiled before an estimate count too.
graph_observers: Registry[Callable[[object, Callable, str], Callable]] = Registry(
    "torch_neuronx.compiler.hooks.graph_observers")


def any_op_by_op() -> bool:
    return any(predicate() for predicate in op_by_op.entries())


def key_fields() -> list[tuple]:
    return [fields() for fields in cache_key_fields.entries()]


def observed(gm, compiled: Callable, name: str) -> Callable:
    for observer in graph_observers.entries():
        compiled = observer(gm, compiled, name)
    return compiled


@dataclass(frozen=True)
class CompileOverride:
    """How graphs compile while a higher layer's session is active (a dry run: Inductor's real
    program with no-op kernels, torch_neuronx/plan/compiled.py).

    key_field: joins the cache key's option fields, so programs compiled under the override never
      serve a compile outside it, nor the reverse.
    inductor_context: entered around Inductor's compile, in place of building the C++ kernel
      libraries (the override's programs do not run real kernels).
    While an override is active no graph runs as a host program (compiler/_host_program.py): its
    kernels do not run, so there is nothing to run on host views.
    """

    key_field: str
    inductor_context: Callable[[], ContextManager]


class _OverrideStack:
    """Why a stack: sessions nest (a dry run inside a dry run), and the innermost one applies."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stack: list[tuple[object, CompileOverride]] = []

    def push(self, override: CompileOverride) -> object:
        """Apply `override` until `remove(token)`; returns the token."""
        if not isinstance(override, CompileOverride):
            raise TypeError(f"compile_overrides.push(override={override!r}): pass a "
                            "torch_neuronx.compiler.hooks.CompileOverride")
        token = object()
        with self._lock:
            self._stack.append((token, override))
        return token

    def remove(self, token: object) -> None:
        with self._lock:
            self._stack = [entry for entry in self._stack if entry[0] is not token]

    def active(self) -> CompileOverride | None:
        stack = self._stack
        return stack[-1][1] if stack else None


compile_overrides = _OverrideStack()
