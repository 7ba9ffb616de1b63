"""The record of every graph the neuron backend compiled: one entry per static program.

Why a record and not only counters: a plan must say which distinct graphs a run compiles, per rank
and input shape, what made each new (its first call, a new shape, a guard failure, a graph break),
and whether a warm persistent cache would have served it. `torch_neuronx.metrics` (its tables and
`get_compilation_metrics()`) and the plan's compile budget (plan/_compile_budget.py) both read
these records, so the two can never disagree.

Cheap by default: shapes, FX node counts and the cache key are read at each compile (the key is
computed for the cache anyway). FLOPs need a fake-tensor run of the graph, so they are counted
only while someone wants them: a dry run (a compile override is active), compile-only mode, or
metrics switched on (`detail_wanted`).

Warm cache: each program compiled for real (not under a dry run's no-op kernels) writes its key
into `<cache dir>/torch-<version>/neuron-graphs/`, the same folder tree as Inductor's on-disk
cache. A later compile of the same graph with the same compiler flags finds its key there, which
is what a warm persistent cache would serve (`warm` in the record), dry runs included.
"""
from __future__ import annotations

import os
import threading
import time
import weakref
from dataclasses import dataclass, field

CAUSES = ("first call", "new shape", "guard failure", "graph break")
_RESUME_PREFIX = "torch_dynamo_resume_in_"   # Dynamo's name for the code after a graph break
_INDEX_DIR = "neuron-graphs"

_lock = threading.Lock()
_records: list["GraphRecord"] = []
_detail_switches: dict[str, bool] = {}   # who wants FLOPs counted: name -> on (set_detail)
# Dynamo compile ids that already produced a graph, per CompileContext object: keyed weakly, so a
# context's ids go with it (an id() key could match a later context at the same address, and frame
# ids start again after torch._dynamo.reset(): a first call taken for a graph break)
_compiles_seen: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass
class GraphRecord:
    """One static program the backend produced (compiled, or served by a cache)."""
    index: int                     # order in the process (0, 1, ...)
    graph_name: str                # the backend's name, as in artifacts ("forward_0_0")
    model_name: str
    function: str                  # the compiled Python function ("forward (model.py:12)")
    rank: int
    cause: str                     # one of CAUSES
    detail: str                    # what changed: "input 0 shape (2, 8) -> (3, 8)", Dynamo's guard text, ...
    inputs: tuple                  # ((shape, dtype), ...) of the data inputs (no parameters, buffers)
    fx_nodes: int                  # operation nodes of the Dynamo graph (no placeholders, no output)
    training: bool                 # an input needs grad: AOTAutograd compiles a backward graph too
    has_collectives: bool
    key: str | None                # persistent key: graph code, input metadata, compiler flags, versions
    flags: tuple                   # the compiler flags in the key (CompileOptions.key_fields)
    source: str                    # "compiled", "memory cache", "disk cache", "dry run" or "failed: runs eagerly"
    warm: bool                     # a warm persistent cache holds this key (compiled before)
    compile_s: float = 0.0         # this host's wall time in the backend for it
    flops: int | None = None       # forward FLOPs (torch.utils.flop_counter), when detail was wanted
    timestamp: str = ""
    executed_calls: int = 0        # calls that ran (0 in compile-only mode)
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "extra"}
        out["inputs"] = [[list(shape), dtype] for shape, dtype in self.inputs]
        out["flags"] = [repr(f) for f in self.flags]
        return out


# ------------------------------------------------------------------------------- switches

def set_detail(name: str, on: bool) -> None:
    """Ask (or stop asking) for FLOPs in the records; `name` says who asks ("metrics", ...)."""
    with _lock:
        _detail_switches[name] = bool(on)


def detail_wanted() -> bool:
    from . import hooks
    from ..runtime import env

    return (any(_detail_switches.values()) or hooks.compile_overrides.active() is not None
            or bool(env.parse_flag(env.COMPILE_ONLY)))


# ------------------------------------------------------------------------------- causes

def graph_cause(gm, is_recompile: bool, previous_signature, signature) -> tuple[str, str]:
    """Why Dynamo handed the backend this graph: (cause, detail)."""
    from torch._guards import CompileContext, TracingContext

    compile_id = CompileContext.current_compile_id()
    tc = TracingContext.try_get()
    code = tc.traced_code[0] if tc is not None and getattr(tc, "traced_code", None) else None
    context = CompileContext.try_get()
    seen_key = (compile_id.frame_id, compile_id.frame_compile_id) if compile_id is not None else None
    with _lock:
        seen = _compiles_seen.setdefault(context, set()) if context is not None and seen_key is not None else None
        repeat = seen is not None and seen_key in seen
        if seen is not None:
            seen.add(seen_key)
    if repeat or (code is not None and code.co_name.startswith(_RESUME_PREFIX)):
        where = code.co_name[len(_RESUME_PREFIX):] if code is not None and code.co_name.startswith(_RESUME_PREFIX) else ""
        return "graph break", f"the code after a graph break{' in ' + where if where else ''}"
    if not is_recompile:
        return "first call", ""
    if previous_signature is not None and signature_changed(previous_signature, signature):
        return "new shape", shape_diff(previous_signature, signature)
    return "guard failure", _dynamo_guard_reason(code)


def signature_changed(old: list, new: list) -> bool:
    return len(old) != len(new) or any(a != b for a, b in zip(old, new))


def shape_diff(old: list, new: list) -> str:
    if len(old) != len(new):
        return f"number of inputs {len(old)} -> {len(new)}"
    changes = [f"input {i} {'shape' if a[1:] == b[1:] else 'signature'} {a[0]} -> {b[0]}"
               for i, (a, b) in enumerate(zip(old, new)) if a != b]
    return "; ".join(changes[:3])


def _dynamo_guard_reason(code) -> str:
    """The last guard Dynamo saw fail for this code (its own text), when it kept one."""
    import sys

    utils = sys.modules.get("torch._dynamo.utils")
    failures = getattr(utils, "guard_failures", None) if utils is not None else None
    reasons = failures.get(code) if failures is not None and code is not None else None
    if reasons:
        return str(reasons[-1]).strip().splitlines()[0][:300]
    return "a guard on a non-tensor value failed (same input shapes)"


# ------------------------------------------------------------------------------- sizes

def data_inputs(inputs) -> tuple:
    """((shape, dtype), ...) of the graph's tensor inputs that are data, not the parameters and buffers
    Dynamo lifts into the graph (it marks those with a static address): what a user's shapes change."""
    import torch

    return tuple((tuple(x.shape), str(x.dtype)) for x in inputs
                 if isinstance(x, torch.Tensor) and not isinstance(x, torch.nn.Parameter)
                 and getattr(x, "_dynamo_static_input_type", None) is None)


def fx_nodes(gm) -> int:
    return sum(1 for n in gm.graph.nodes if n.op not in ("placeholder", "output", "get_attr"))


def has_collectives(gm) -> bool:
    names = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")
    for node in gm.graph.nodes:
        if node.op == "call_function" and any(n in str(node.target) for n in names):
            return True
    return False


def forward_flops(gm, example_inputs) -> int | None:
    """FLOPs of one call of the graph, counted by torch.utils.flop_counter on fake tensors (nothing
    runs, nothing is allocated); None when the graph cannot run on fake tensors."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils._python_dispatch import _disable_current_modes
    from torch.utils.flop_counter import FlopCounterMode

    try:
        with _disable_current_modes():   # a dry run's or an estimate's mode must not see these ops
            fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
            with fake_mode:
                fakes = [fake_mode.from_tensor(x) if isinstance(x, torch.Tensor) else x for x in example_inputs]
            with fake_mode, FlopCounterMode(display=False) as counter, torch.no_grad():
                gm(*fakes)
            return int(counter.get_total_flops())
    except Exception:  # noqa: BLE001 - a size is reported as unknown rather than failing the compile
        return None


# ------------------------------------------------------------------------------- warm index

def _index_path(cache_root: str, key: str) -> str:
    return os.path.join(cache_root, _INDEX_DIR, key[:2], key)


def is_warm(cache_root: str | None, key: str | None) -> bool:
    return bool(cache_root and key and os.path.exists(_index_path(cache_root, key)))


def mark_warm(cache_root: str | None, key: str | None, graph_name: str) -> None:
    """Note that a real program of this key is in the persistent cache (atomically; errors ignored:
    the cache itself works without the index)."""
    if not cache_root or not key:
        return
    path = _index_path(cache_root, key)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(graph_name + "\n")
        os.replace(tmp, path)
    except OSError:
        pass


# ------------------------------------------------------------------------------- records

def add(**fields) -> GraphRecord:
    with _lock:
        record = GraphRecord(index=len(_records), timestamp=time.strftime("%Y%m%d-%H%M%S"), **fields)
        _records.append(record)
        return record


def records(start: int = 0) -> list[GraphRecord]:
    """The records from number `start` on (a session keeps the count it started at)."""
    with _lock:
        return list(_records[start:])


def count() -> int:
    with _lock:
        return len(_records)


def reset() -> None:
    """Forget the records (the caches and the warm index are kept)."""
    with _lock:
        _records.clear()
        _compiles_seen.clear()
