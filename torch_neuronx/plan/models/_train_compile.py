"""`plan train --torch-compile`: the training step with the model compiled, as TorchNeuron runs it.

The model runs as `torch.compile(model, backend="neuron", dynamic=False)`, which is what the
Hugging Face Trainer's `--torch_compile true` does on neuron (accelerate compiles the prepared
model with the Trainer's backend, "neuron", and `dynamic=False`: one graph per shape). Forward and
backward run as AOTAutograd's compiled graphs (in a dry run Inductor's real program with no-op
kernels, plan/compiled.py), each costed as one fused program; the optimizer step stays eager, as
the Trainer runs it. The report counts the graphs: compiled, distinct, recompilations and breaks.
"""
from __future__ import annotations

import torch


def compiled(model):
    """The callable the step runs: the model compiled with the neuron backend, static shapes."""
    return torch.compile(model, backend="neuron", dynamic=False)


def metrics() -> dict:
    """The neuron backend's compile counters now (compared with graphs' later reading)."""
    from ...compiler import get_dynamo_metrics

    return get_dynamo_metrics()


def graphs(before: dict | None, region) -> dict:
    """The graphs the plan's steps compiled (from `before` on) and the distinct graphs the timed
    step ran."""
    now = metrics()
    before = before or {k: 0 for k in ("graphs_compiled", "recompilations", "graph_breaks")}   # nothing before
    names = sorted({e.name for e in region.est.events if e.kind == "graph"})
    return {"graphs_compiled": now["graphs_compiled"] - before["graphs_compiled"],
            "recompilations": now["recompilations"] - before["recompilations"],
            "graph_breaks": now["graph_breaks"] - before["graph_breaks"],
            "distinct_graphs_in_step": len(names), "graph_names": names,
            "recompile_reasons": now["recompile_reasons"][len(before.get("recompile_reasons", [])):],
            "graph_break_reasons": {k: n - before.get("graph_break_reasons", {}).get(k, 0)
                                    for k, n in now["graph_break_reasons"].items()
                                    if n > before.get("graph_break_reasons", {}).get(k, 0)}}
