"""`torch_neuronx.metrics`: TorchNeuron's metrics of compiled graphs.

    torch_neuronx.metrics.set_enabled(True)        # or TORCH_NEURONX_METRICS_ENABLED=1
    ...                                            # torch.compile(..., backend="neuron") runs
    print(torch_neuronx.metrics.report())          # the metric tables as text
    rows = torch_neuronx.metrics.get_compilation_metrics()   # one CompilationMetrics per graph

Each row is one compiled graph, read from the compiler's own record of it
(torch_neuronx.compiler.compiled_graphs), the same record the plan's compile budget reads, so a
plan and these metrics always agree. With metrics enabled the rows also carry each graph's FLOPs.
TORCH_NEURONX_ENABLED_METRIC_TABLES=graph_stats writes the table at exit as
`$TORCH_NEURONX_METRICS_DIR/metric_table_graph_stats_rank<rank>.csv` (default folder /tmp), the
file TorchNeuron writes. See docs/compile-budget.md.
"""
from __future__ import annotations

from ._metrics import (
    METRIC_TABLES,
    CompilationMetrics,
    get_compilation_metrics,
    install,
    is_enabled,
    report,
    reset,
    set_enabled,
    write_tables,
)

__all__ = ["set_enabled", "is_enabled", "report", "get_compilation_metrics", "reset", "write_tables",
           "CompilationMetrics", "METRIC_TABLES", "install"]
