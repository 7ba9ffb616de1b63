"""Iteration, SPMD position and debugging helpers (all evaluated in plain Python)."""
from __future__ import annotations

import contextlib

import numpy as np

from ..simulator.context import current

__all__ = ["affine_range", "sequential_range", "static_range", "dynamic_range", "program_id",
           "num_programs", "program_ndim", "device_print", "no_reorder", "fori_loop"]


def affine_range(start, stop=None, step=1, **kw):
    """Deprecated alias of ``range`` (loops are fully unrolled)."""
    return range(start, stop, step) if stop is not None else range(start)


sequential_range = static_range = dynamic_range = affine_range


def program_id(axis=0):
    """Index of the running SPMD program along ``axis``."""
    run = current("nl.program_id")
    if not 0 <= axis < len(run.grid):
        raise IndexError(f"program_id axis {axis} out of range for launch grid {run.grid}")
    return run.program[axis]


def num_programs(axes=0):
    """Size of the launch grid along ``axes`` (int or tuple; None: all axes)."""
    run = current("nl.num_programs")
    if axes is None:
        return int(np.prod(run.grid))
    if isinstance(axes, (tuple, list)):
        return int(np.prod([run.grid[a] for a in axes]))
    return run.grid[axes]


def program_ndim():
    return len(current("nl.program_ndim").grid)


def device_print(prefix, x=None, **kw):
    """Print a tensor's current simulated contents."""
    current("nl.device_print")
    print(prefix, np.asarray(x) if x is not None else "")


@contextlib.contextmanager
def no_reorder():
    """No-op in the simulator (execution is always in program order)."""
    yield


def fori_loop(lower, upper, body_fun, step=1, init=None):
    """Run ``body_fun(i)`` (or ``body_fun(i, carry)`` when ``init`` is given) for i in range."""
    carry = init
    for i in range(lower, upper, step):
        carry = body_fun(i) if init is None else body_fun(i, carry)
    return carry
