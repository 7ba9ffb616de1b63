"""The C++ pre-filter in front of the numerics dispatch mode (csrc/numerics_filter.cpp).

A Python dispatch mode costs its Python entry on every op (~1.9x on a float32
transformer block, before any check). The filter, a C++ fallback at the
mode's place in the dispatch order, calls `NumericsMode.dispatch` only for an
op with a neuron tensor or dtype argument of a watched dtype, and
`NumericsMode.produced` only for an op whose one result is a watched neuron
tensor; every other op runs without Python. The mode then decides as it does
when pushed, so the reports are the same either way.

Like a Python mode, the filter is per thread: it covers the thread that
enables it and the autograd threads its backward passes start.
"""
from __future__ import annotations

import contextlib

from .. import _C


def enable(mode) -> bool:
    """Route this thread's ops through `mode` (a NumericsMode). False when this torch
    uses the filter's dispatch key itself; the caller then pushes `mode` as a Python mode."""
    return _C._numerics_filter_enable(mode.dispatch, mode.produced, sorted(mode.watch, key=str))


def disable() -> None:
    _C._numerics_filter_disable()


def active() -> bool:
    return _C._numerics_filter_active()


def python_calls() -> int:
    """Ops the filter has handed to Python so far (all threads)."""
    return _C._numerics_filter_python_calls()


@contextlib.contextmanager
def filtering(mode):
    """`mode` through the filter for the duration (benchmarks and tests; install() never leaves)."""
    if not enable(mode):
        raise RuntimeError("the numerics filter's dispatch key is in use by this torch; "
                           "push the NumericsMode as a Python mode instead")
    try:
        yield mode
    finally:
        disable()
