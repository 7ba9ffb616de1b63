"""Compile metrics of the neuron backend: `torch_neuronx.get_dynamo_metrics()`.

Cheap to import (no dynamo); graph breaks are read from Dynamo's counters
only when Dynamo is already loaded.
"""
from __future__ import annotations

import sys
import threading
from collections import defaultdict

from ..runtime.units import counts_since

_lock = threading.Lock()


def _fresh() -> dict:
    return {
        "graphs_compiled": 0,          # programs built (cache misses and disk hits)
        "compile_time_s": 0.0,         # wall time spent in the backend, all graphs
        "cache_hits_memory": 0,
        "cache_hits_disk": 0,
        "cache_misses": 0,
        "recompilations": 0,           # compiles of an already compiled function for new inputs
        "recompile_reasons": [],       # "fn: input 0 shape (2, 8) -> (3, 8)"
        "fallbacks": 0,                # graphs that failed to compile and run eagerly
        "compile_failures": [],        # "graph: error" of each failed compile
        "dynamic_specializations": 0,  # static graphs built for symbolic (automatic-dynamic) graphs
    }


_state = _fresh()
_graph_break_base: dict[str, int] = {}   # Dynamo's graph-break counter (reason -> count) at the last reset
_recompiles_per_fn: dict[str, int] = defaultdict(int)
_warned_fns: set[str] = set()


def _dynamo_graph_breaks() -> dict[str, int]:
    """Dynamo's own graph-break counter, keyed by its reason text (empty until Dynamo is loaded)."""
    if "torch._dynamo.utils" not in sys.modules:
        return {}
    counters = sys.modules["torch._dynamo.utils"].counters
    return {str(reason): int(n) for reason, n in counters["graph_break"].items()}


def _breaks_since_reset() -> dict[str, int]:
    return counts_since(_dynamo_graph_breaks(), _graph_break_base)


def record(**increments) -> None:
    with _lock:
        for name, value in increments.items():
            if isinstance(_state[name], list):
                _state[name].append(value)
            else:
                _state[name] += value


def note_recompile(function: str, reason: str) -> int:
    """Count a recompilation of `function`; returns how many it has had."""
    with _lock:
        _state["recompilations"] += 1
        _state["recompile_reasons"].append(f"{function}: {reason}")
        _recompiles_per_fn[function] += 1
        return _recompiles_per_fn[function]


def should_warn_recompiles(function: str, threshold: int) -> bool:
    with _lock:
        if _recompiles_per_fn[function] > threshold and function not in _warned_fns:
            _warned_fns.add(function)
            return True
        return False


def get_dynamo_metrics() -> dict:
    """Counters of the neuron torch.compile backend since the last reset.

    Keys: graphs_compiled, compile_time_s, cache_hits_memory, cache_hits_disk,
    cache_misses, recompilations, recompile_reasons, graph_breaks, graph_break_reasons
    ({Dynamo's reason: count}, most frequent first: why code ran eagerly between graphs),
    fallbacks, compile_failures, dynamic_specializations.
    """
    with _lock:
        out = {k: (list(v) if isinstance(v, list) else v) for k, v in _state.items()}
        breaks = _breaks_since_reset()
        out["graph_breaks"] = sum(breaks.values())
        out["graph_break_reasons"] = dict(sorted(breaks.items(), key=lambda kv: -kv[1]))
    return out


def reset_dynamo_metrics() -> None:
    """Zero every counter (the compile caches are kept)."""
    global _state, _graph_break_base
    with _lock:
        _state = _fresh()
        _graph_break_base = _dynamo_graph_breaks()
        _recompiles_per_fn.clear()
        _warned_fns.clear()
