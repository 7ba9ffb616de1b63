"""The stack of active recorders: who receives the estimated cost of each op, graph and collective.

A recorder is anything that collects estimates while it is active: an `Estimate` (and so a dry
run's estimate and a plan's timed region), or the profiler's device track. Recorders nest:

- `push(recorder)` / `pop(recorder)` (or `with active_recorder(recorder):`) add and remove one;
  the stack is ordered outermost first. Pushing inside another is always allowed: an estimate
  inside a dry run, a dry run inside an estimate, the device track inside either or around them.
- Each op, compiled graph and collective is costed ONCE by the cost model for each distinct
  `Hardware` among the active recorders (in practice one), and that one cost is delivered to every
  active recorder. Eager ops are costed by the innermost estimate's dispatch mode only; the modes
  of outer estimates let the op through (`is_costing`).
- What a recorder does with the cost is its own: an estimate lays it out on its own stream clock
  (so a region entered late starts at zero), applies its own eager fusion run and attributes it to
  the modules it saw; the device track keeps it for the trace.
- `suppressed(recorders)` brackets work whose ops are already counted (the extern kernels a
  compiled graph runs): no recorder in the bracket receives those ops as eager ops.

Outside any recorder the hooks read one list and go on: zero cost when off.

What a recorder has (Estimate in _api.py, the device track's recorder in profiling/_device_track.py):
`hardware` (a Hardware: the cost model's input), `include_fake` (also take ops on FakeTensors),
`_suppress` (an int, > 0 inside a suppressed bracket), and the deliveries
`take_op(e, func, args, kwargs, out, device, host_sync)`, `no_model(name)`,
`record_graph(g, device, phase)` and `record_collective(c, device)`.
"""
from __future__ import annotations

import contextlib

_stack: list = []   # the active recorders, outermost first
_modes: list = []   # the estimates' dispatch modes, innermost last: the last one costs eager ops


def active() -> tuple:
    """The active recorders, outermost first (empty when nothing records)."""
    return tuple(_stack)


def innermost(kind: type | None = None):
    """The innermost active recorder (of class `kind` when given), else None."""
    for rec in reversed(_stack):
        if kind is None or isinstance(rec, kind):
            return rec
    return None


def push(recorder) -> None:
    if any(r is recorder for r in _stack):
        raise RuntimeError(f"{type(recorder).__name__} is already recording; create a new one")
    _stack.append(recorder)


def pop(recorder) -> None:
    """Remove `recorder` (the innermost, or any: a profiler trace may end after the estimate it
    started in)."""
    for i in range(len(_stack) - 1, -1, -1):
        if _stack[i] is recorder:
            del _stack[i]
            return


@contextlib.contextmanager
def active_recorder(recorder):
    """`with active_recorder(r):` r receives every estimate delivered inside."""
    push(recorder)
    try:
        yield recorder
    finally:
        pop(recorder)


# ---- eager ops: one costing dispatch mode ---------------------------------------------------------

def enter_mode(mode) -> None:
    _modes.append(mode)


def exit_mode(mode) -> None:
    for i in range(len(_modes) - 1, -1, -1):
        if _modes[i] is mode:
            del _modes[i]
            return


def is_costing(mode) -> bool:
    """Is `mode` the one dispatch mode that costs eager ops (the innermost estimate's)?"""
    return bool(_modes) and _modes[-1] is mode


def receiving_ops() -> list:
    """The active recorders that take eager ops now (not inside a suppressed bracket)."""
    return [r for r in _stack if not r._suppress]


# ---- delivery -------------------------------------------------------------------------------------

def by_hardware(recs) -> list[tuple]:
    """[(hardware, [recorders])]: the cost model runs once per distinct hardware (Hardware holds
    dicts, so it is compared, not hashed)."""
    groups: list[tuple] = []
    for r in recs:
        for hw, group in groups:
            if hw is r.hardware or hw == r.hardware:
                group.append(r)
                break
        else:
            groups.append((r.hardware, [r]))
    return groups


def deliver_graph(recs, g, device: int, phase: str | None = None) -> None:
    for r in recs:
        r.record_graph(g, device, phase)


@contextlib.contextmanager
def suppressed(recs):
    """Inside, `recs` receive no eager ops (their cost is counted another way, e.g. in a graph)."""
    begin_suppress(recs)
    try:
        yield
    finally:
        end_suppress(recs)


def begin_suppress(recs) -> None:
    for r in recs:
        r._suppress += 1


def end_suppress(recs) -> None:
    for r in recs:
        r._suppress -= 1
