"""fullgraph=True and graph breaks both work; breaks are counted."""
from __future__ import annotations

import pytest
import torch

import torch_neuronx
from tests.compiler.conftest import elementwise, neuron_randn


def with_break(x, y):
    a = elementwise(x, y)
    torch._dynamo.graph_break()
    return elementwise(a, y)


def test_fullgraph_true_compiles_one_graph():
    x, y = neuron_randn(2, 8), neuron_randn(2, 8, seed=1)
    out = torch.compile(elementwise, backend="neuron", fullgraph=True)(x, y)
    torch.testing.assert_close(out, elementwise(x, y))
    assert torch_neuronx.compiler.get_dynamo_metrics()["graph_breaks"] == 0


def test_graph_break_gives_two_compiled_graphs():
    x, y = neuron_randn(2, 8), neuron_randn(2, 8, seed=1)
    out = torch.compile(with_break, backend="neuron")(x, y)
    torch.testing.assert_close(out, with_break(x, y))
    m = torch_neuronx.compiler.get_dynamo_metrics()
    assert m["graph_breaks"] >= 1
    # both halves are the same graph: the second is served by the memory cache
    assert m["graphs_compiled"] + m["cache_hits_memory"] == 2


def test_fullgraph_true_raises_on_graph_break():
    with pytest.raises(Exception, match="graph_break|Call to `torch._dynamo.graph_break"):
        torch.compile(with_break, backend="neuron", fullgraph=True)(neuron_randn(2, 8), neuron_randn(2, 8))


def test_graph_break_reasons_name_why_code_ran_eagerly():
    # a user asks "why is my model not one graph": the metrics give Dynamo's own reason text per break
    torch_neuronx.compiler.reset_dynamo_metrics()
    torch.compile(with_break, backend="neuron")(neuron_randn(2, 8), neuron_randn(2, 8, seed=1))
    m = torch_neuronx.compiler.get_dynamo_metrics()
    assert sum(m["graph_break_reasons"].values()) == m["graph_breaks"] >= 1
    assert any("graph_break" in reason for reason in m["graph_break_reasons"]), m["graph_break_reasons"]
    torch_neuronx.compiler.reset_dynamo_metrics()
    assert torch_neuronx.compiler.get_dynamo_metrics()["graph_break_reasons"] == {}
