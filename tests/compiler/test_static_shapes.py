"""Static shapes as on Trainium: a graph per input shape, dynamic=True refused,
other modes warn, recompilations are counted with reasons and warned about."""
from __future__ import annotations

import warnings

import pytest
import torch

import torch_neuronx
from tests.compiler.conftest import elementwise, neuron_randn


@pytest.mark.parametrize("dynamic", [False, None])
def test_each_new_shape_compiles_a_static_graph(dynamic):
    compiled = torch.compile(elementwise, backend="neuron", dynamic=dynamic)
    for rows in (2, 3, 4, 3):
        x, y = neuron_randn(rows, 8), neuron_randn(rows, 8, seed=1)
        torch.testing.assert_close(compiled(x, y), elementwise(x, y))
    m = torch_neuronx.compiler.get_dynamo_metrics()
    assert m["recompilations"] == 2  # 3 and 4 rows; 3 again reuses its graph
    assert any("(2, 8) -> (3, 8)" in r for r in m["recompile_reasons"]), m["recompile_reasons"]
    if dynamic is None:  # Dynamo went automatic-dynamic; we still built static programs
        assert m["dynamic_specializations"] == 2


def test_dynamic_true_is_refused_clearly():
    compiled = torch.compile(elementwise, backend="neuron", dynamic=True)
    with pytest.raises(Exception, match="dynamic=True.*not supported"):
        compiled(neuron_randn(2, 8), neuron_randn(2, 8))


def test_other_modes_warn_once_per_process_and_proceed(monkeypatch):
    from torch_neuronx.compiler import _options as options

    monkeypatch.setattr(options, "_warned_modes", set())
    compiled = torch.compile(elementwise, backend="neuron", mode="max-autotune")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for rows in (2, 3):  # two graphs, each resolving the options
            x, y = neuron_randn(rows, 8), neuron_randn(rows, 8, seed=1)
            torch.testing.assert_close(compiled(x, y), elementwise(x, y))
    mode_warnings = [str(w.message) for w in caught if "does not support mode" in str(w.message)]
    assert mode_warnings == ["Neuron backend does not support mode='max-autotune', falling back to default mode"]


def test_repeated_shape_changes_warn_once_with_advice(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_RECOMPILE_WARN_THRESHOLD", "1")
    compiled = torch.compile(elementwise, backend="neuron", dynamic=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for rows in (2, 3, 4, 5):
            compiled(neuron_randn(rows, 8), neuron_randn(rows, 8))
    advice = [w for w in caught if "multiple of 128" in str(w.message)]
    assert len(advice) == 1, [str(w.message) for w in caught]
    assert "static" in str(advice[0].message) and "prefill_chunk_size" in str(advice[0].message)
