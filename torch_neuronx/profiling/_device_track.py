"""Estimated Trainium times for the profiler's device track.

While a `torch.profiler` trace with `ProfilerActivity.PrivateUse1` records, the
C++ session (csrc/profiler.cpp) notes every device kernel that ran on neuron:
its ATen name and overload, core, and its arguments and results as meta
tensors of the same shapes. Compiled graphs and collectives run from Python;
`begin_session` pushes a recorder on the cost model's recorder stack
(`torch_neuronx.estimate.recorders`, which the neuron compile backend and
process group deliver to) so that they are recorded too, inside an estimate or
a dry run as well. There each eager op is costed once, by the estimate's
dispatch mode, and that cost is delivered here too; `estimate_ops` costs only
the noted ops nobody costed. When the trace is processed the session calls
`estimate_ops` once; what it returns becomes the device track, laid out in
stream order by the session.

The cost model is `torch_neuronx.estimate` (`op_estimate`, and its graph and
collective estimates); this module only adapts the session's notes to it.
"""
from __future__ import annotations

import threading
from collections import deque
import time
import warnings
from typing import Any

import torch

_warned: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def _estimate_package():
    try:
        from torch_neuronx import estimate
    except ImportError as err:  # pragma: no cover - the package ships with torch_neuronx
        _warn_once("model", f"torch_neuronx profiler: no cost model ({err}); no device track.")
        return None
    return estimate


# ---- compiled graphs and collectives ---------------------------------------------------------

class _SessionRecorder:
    """Stands in the cost model's hook while a profiler session records.

    The compile backend calls `record_graph` after a compiled graph ran, inside
    a `_suppress` bracket around the run; the process group calls
    `record_collective` before each collective. The bracket gives the graph's
    host interval, which also tells `estimate_ops` which noted ops were the
    graph's own extern kernels (counted in the graph, not again).
    """

    include_fake = False   # the C++ session notes kernels on real neuron tensors only

    def __init__(self, hardware) -> None:
        self.hardware = hardware
        self.programs: list[tuple] = []
        self.costed: dict[tuple, deque] = {}   # (op, overload, device) -> estimates delivered, in order
        self.suppressed: list[tuple[int, int]] = []  # host intervals (ns) of graph runs
        self._local = threading.local()

    @property
    def _suppress(self) -> int:
        return getattr(self._local, "depth", 0)

    @_suppress.setter
    def _suppress(self, value: int) -> None:
        depth = self._suppress
        if depth == 0 and value > 0:
            self._local.since = time.time_ns()
        elif depth > 0 and value == 0:
            self._local.last = (self._local.since, time.time_ns())
            self.suppressed.append(self._local.last)
        self._local.depth = value

    def _label(self) -> dict:
        return {"instance": self.hardware.name}

    def record_graph(self, g, device: int, phase: str | None = None) -> None:
        start, end = getattr(self._local, "last", None) or (time.time_ns(),) * 2
        meta = {**self._label(), "bound": g.bound, "category": "compiled graph",
                "phase": phase or "forward", "flops": int(g.flops), "bytes": int(g.bytes),
                "explain": g.explain()}
        self.programs.append((f"neuron graph {g.name} ({phase or 'forward'})", int(device), 0,
                              start, end, float(g.seconds), meta))

    def record_collective(self, c, device: int) -> None:
        now = time.time_ns()
        meta = {**self._label(), "bound": c.bound, "category": f"collective:{c.kind}",
                "bytes": int(c.bytes), "group_size": int(c.group_size), "placement": c.placement,
                "algorithm": c.algorithm}
        self.programs.append((c.name, int(device), 0, now, now, float(c.seconds), meta))

    def take_op(self, e, func, args, kwargs, out, device: int, host_sync: bool) -> None:
        """An eager op an estimate's dispatch mode costed (recorders.py): kept for `estimate_ops`,
        which matches it to the kernel the C++ session noted instead of costing it again."""
        key = (func._schema.name, func._overloadname, int(device))
        self.costed.setdefault(key, deque()).append(e)

    def record_op(self, e, device: int) -> None:  # an estimate lays out ops; the trace has its own clock
        pass

    def no_model(self, name: str) -> None:   # the trace shows no event for it, as estimate_ops does
        pass

    def take_costed(self, name: str, overload: str, device: int):
        """The estimate delivered for this noted kernel, else None (the kernels of one key are
        noted and delivered in the same order)."""
        queue = self.costed.get((name, overload or "default", int(device)))
        return queue.popleft() if queue else None


_session: dict[str, Any] = {"recorder": None}


def begin_session() -> None:
    """Called by the C++ session when a trace with the PrivateUse1 activity starts."""
    est = _estimate_package()
    if est is None:
        return
    from torch_neuronx.estimate import recorders

    recorder = _SessionRecorder(est.hardware())
    _session["recorder"] = recorder
    recorders.push(recorder)


def end_session() -> None:
    from torch_neuronx.estimate import recorders

    recorder = _session["recorder"]
    if recorder is not None:
        recorders.pop(recorder)


# ---- eager ops ---------------------------------------------------------------------------------

def _overload(name: str, overload: str):
    namespace, _, op = name.partition("::")
    packet = getattr(getattr(torch.ops, namespace), op)
    return getattr(packet, overload or "default")


def _split(func, inputs: list) -> tuple[tuple, dict]:
    """Positional and keyword arguments as the op's schema declares them."""
    args, kwargs = [], {}
    for argument, value in zip(func._schema.arguments, inputs):
        if argument.kwarg_only:
            kwargs[argument.name] = value
        else:
            args.append(value)
    return tuple(args), kwargs


def _metadata(est, hardware) -> dict:
    """What a reader of the trace sees next to each estimated kernel."""
    return {"instance": hardware.name, "bound": est.bound, "category": est.category,
            "engine": est.engine, "flops": int(est.flops), "bytes": int(est.bytes),
            "modelled": bool(est.modelled)}


def _inside(start: int, end: int, intervals: list[tuple[int, int]]) -> bool:
    return any(lo <= start and end <= hi for lo, hi in intervals)


def estimate_ops(batch: list[tuple]) -> tuple[list[tuple[float, dict]], list[tuple]]:
    """(one (seconds, metadata) per noted op, the recorded graphs and collectives).

    Each entry of `batch` is (name, overload, device, inputs, outputs,
    host_start_ns, host_end_ns), tensors being meta tensors of the real shapes.
    Seconds <= 0 means no device work (views, allocation): no event.
    """
    recorder = _session["recorder"]
    _session["recorder"] = None
    programs = recorder.programs if recorder is not None else []
    suppressed = recorder.suppressed if recorder is not None else []
    est = _estimate_package()
    if est is None:
        return [(0.0, {}) for _ in batch], programs
    hardware = recorder.hardware if recorder is not None else est.hardware()
    results: list[tuple[float, dict]] = []
    for name, overload, device, inputs, outputs, start_ns, end_ns in batch:
        if suppressed and _inside(start_ns, end_ns, suppressed):
            results.append((0.0, {}))  # an extern kernel of a compiled graph: counted in the graph
            continue
        e = recorder.take_costed(name, overload, device) if recorder is not None else None
        if e is not None:   # costed once already, by an estimate's dispatch mode
            results.append((0.0, {}) if e.bound == "none" else (float(e.seconds), _metadata(e, hardware)))
            continue
        try:
            func = _overload(name, overload)
        except AttributeError:
            results.append((0.0, {}))
            continue
        args, kwargs = _split(func, inputs)
        out = outputs[0] if len(outputs) == 1 else tuple(outputs)
        try:
            e = est.op_estimate(func, args, kwargs, out, hardware=hardware)
        except Exception as err:  # noqa: BLE001 - one op's model must not lose the trace
            _warn_once(f"op:{name}", f"torch_neuronx profiler: no estimate for {name} "
                       f"({type(err).__name__}: {err}); it has no event on the device track.")
            results.append((0.0, {}))
            continue
        if e.bound == "none":
            results.append((0.0, {}))  # metadata only: no kernel on the device
        else:
            results.append((float(e.seconds), _metadata(e, hardware)))
    return results, programs
