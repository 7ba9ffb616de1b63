"""FX passes of the neuron backend, run on Dynamo's graph before AOTAutograd.

- `symbolic_inputs`: static-shape analysis. Neuron programs are static: a graph
  whose inputs carry symbolic sizes is either a `dynamic=True` request (an
  error) or Dynamo's automatic-dynamic recompile (specialised per shape).
- `describe_failure`: turns a compile exception into a message that names the
  op and the reason.
"""
from __future__ import annotations

import re

import torch


def _is_symbolic(value) -> bool:
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return True
    if isinstance(value, torch.Tensor):
        return any(isinstance(s, torch.SymInt) for s in (*value.shape, *value.stride())) or isinstance(
            value.storage_offset(), torch.SymInt)
    return False


def symbolic_inputs(gm: torch.fx.GraphModule, example_inputs) -> list[str]:
    """Names of the graph inputs whose sizes, strides or values are symbolic."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    found = []
    for i, value in enumerate(example_inputs):
        if _is_symbolic(value):
            name = placeholders[i].name if i < len(placeholders) else f"input {i}"
            found.append(name)
    return found


_TARGET = re.compile(r"target:\s*([\w.:]+)")


def failing_op(err: BaseException) -> str | None:
    """The op named by an Inductor lowering error anywhere in the exception chain."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        target = getattr(err, "target", None)
        if target is not None:
            return str(target)
        match = _TARGET.search(str(err))
        if match:
            return match.group(1)
        err = err.__cause__ or err.__context__
    return None


def describe_failure(graph_name: str, gm: torch.fx.GraphModule, err: BaseException) -> str:
    op = failing_op(err)
    reason = f"{type(err).__name__}: {err}".strip()
    first_line = reason.splitlines()[0] if reason else type(err).__name__
    where = f" at op {op}" if op else ""
    return (f"neuron backend could not compile graph {graph_name!r}{where}: {first_line}. "
            "Set options={'fallback_execution': True} or TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0 "
            "to run this graph eagerly instead.")
