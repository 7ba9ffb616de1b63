"""The metric tables of compiled graphs, read from the compiler's compile log."""
from __future__ import annotations

import atexit
import csv
import os
import threading
from dataclasses import dataclass, fields

from ..compiler import compiled_graph_count, compiled_graphs, count_graph_flops, get_rank
from ..runtime import env

_lock = threading.Lock()
_state = {"enabled": None, "start": 0}   # enabled: None until set_enabled (then the variable decides)


@dataclass(frozen=True)
class CompilationMetrics:
    """One compiled graph. The first six columns are TorchNeuron's `graph_stats` columns; its phase
    timings (FX passes, lowering, neuronx-cc) have no counterpart here: graphs compile through
    Inductor, whose wall time on this host is `torch_neuronx_compile_us`."""
    graph_id: str                  # the graph's persistent cache key
    graph_name: str
    model_name: str
    has_collectives: bool
    graph_node_count: int          # FX operation nodes of the Dynamo graph
    timestamp: str
    torch_neuronx_compile_us: int  # this host's wall time in the backend (0 when a cache served it)
    function: str                  # the compiled Python function
    rank: int
    input_shapes: str              # "(8, 4) float32; (4,) int64"
    cause: str                     # first call, new shape, guard failure or graph break
    cause_detail: str
    source: str                    # compiled, memory cache, disk cache or dry run
    warm_cache: bool               # a warm persistent cache held this graph (same graph, same flags)
    training: bool                 # a backward graph is compiled with it
    flops: int | None              # forward FLOPs (counted while metrics are enabled)


METRIC_TABLES: dict[str, tuple[str, ...]] = {"graph_stats": tuple(f.name for f in fields(CompilationMetrics))}


def set_enabled(enabled: bool) -> None:
    """Switch metrics on or off (TORCH_NEURONX_METRICS_ENABLED sets the default). While on, each
    compiled graph's FLOPs are counted too (on fake tensors, at compile time)."""
    if not isinstance(enabled, bool):
        raise TypeError(f"torch_neuronx.metrics.set_enabled(enabled={enabled!r}): pass True or False")
    with _lock:
        _state["enabled"] = enabled
    count_graph_flops("metrics", enabled)


def is_enabled() -> bool:
    with _lock:
        on = _state["enabled"]
    return bool(env.parse_flag(env.METRICS_ENABLED)) if on is None else on


def reset() -> None:
    """Start the tables afresh: later calls list only graphs compiled from now on."""
    with _lock:
        _state["start"] = compiled_graph_count()


def _row(r) -> CompilationMetrics:
    shapes = "; ".join(f"{tuple(s)} {d.replace('torch.', '')}" for s, d in r.inputs)
    return CompilationMetrics(
        graph_id=r.key or "", graph_name=r.graph_name, model_name=r.model_name, has_collectives=r.has_collectives,
        graph_node_count=r.fx_nodes, timestamp=r.timestamp, torch_neuronx_compile_us=int(r.compile_s * 1e6),
        function=r.function, rank=r.rank, input_shapes=shapes, cause=r.cause, cause_detail=r.detail,
        source=r.source, warm_cache=r.warm, training=r.training, flops=r.flops)


def get_compilation_metrics() -> list[CompilationMetrics]:
    """One row per graph compiled since the start (or the last reset()), in compile order."""
    with _lock:
        start = _state["start"]
    return [_row(r) for r in compiled_graphs(start)]


def report() -> str:
    """The metric tables as text: a summary line, then the graph_stats table."""
    from ..runtime.units import markdown_table

    rows = get_compilation_metrics()
    compiled = sum(1 for r in rows if r.source == "compiled")
    lines = [f"torch_neuronx.metrics: {len(rows)} graphs ({compiled} compiled, "
             f"{len(rows) - compiled} from a cache or a dry run), "
             f"{sum(r.torch_neuronx_compile_us for r in rows) / 1e6:.2f} s compiling on this host"
             + ("" if is_enabled() else "; metrics are off: FLOPs not counted (set_enabled(True))"), "",
             "graph_stats:"]
    columns = ("graph_name", "function", "rank", "input_shapes", "graph_node_count", "flops", "cause",
               "source", "warm_cache", "torch_neuronx_compile_us")
    lines += markdown_table(list(columns), [[_cell(getattr(r, c)) for c in columns] for r in rows])
    return "\n".join(lines)


def _cell(value) -> str:
    if value is None:
        return "-"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def write_tables(directory: str | None = None, tables: tuple[str, ...] | None = None) -> list[str]:
    """Write the tables as CSV files, `metric_table_<table>_rank<rank>.csv`, into `directory`
    (default TORCH_NEURONX_METRICS_DIR, else /tmp); returns the paths written."""
    tables = tuple(METRIC_TABLES) if tables is None else tables
    for name in tables:
        if name not in METRIC_TABLES:
            raise ValueError(f"write_tables(tables=...): {name!r} is not a metric table; use {list(METRIC_TABLES)}")
    directory = directory or env.get(env.METRICS_DIR) or env.DEFAULT_METRICS_DIR
    os.makedirs(directory, exist_ok=True)
    rows = get_compilation_metrics()
    paths = []
    for name in tables:
        path = os.path.join(directory, f"metric_table_{name}_rank{get_rank()}.csv")
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(METRIC_TABLES[name])
            writer.writerows([[getattr(r, c) for c in METRIC_TABLES[name]] for r in rows])
        paths.append(path)
    return paths


def _write_at_exit() -> None:
    try:
        tables = env.parse_names(env.ENABLED_METRIC_TABLES, tuple(METRIC_TABLES))
    except env.NeuronEnvironmentError as err:
        import sys

        print(f"torch_neuronx.metrics: no tables written: {err}", file=sys.stderr)
        return
    if tables and get_compilation_metrics():
        write_tables(tables=tables)


def install() -> None:
    """At startup: TORCH_NEURONX_METRICS_ENABLED and the tables to write at exit (checked now, so a
    misspelt table name is reported before the run, not after it)."""
    env.parse_names(env.ENABLED_METRIC_TABLES, tuple(METRIC_TABLES))
    if env.parse_flag(env.METRICS_ENABLED):
        count_graph_flops("metrics", True)
    atexit.register(_write_at_exit)
