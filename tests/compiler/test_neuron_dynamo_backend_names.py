"""`torch_neuronx.neuron_dynamo_backend`: TorchNeuron's compile helper API, used as its reference does."""
from __future__ import annotations

import os

import pytest
import torch

import torch_neuronx
from tests.compiler.conftest import elementwise, neuron_randn
from torch_neuronx import compiler
from torch_neuronx.compiler import _options as options
from torch_neuronx.neuron_dynamo_backend import (
    NEFFCompilationError,
    get_dynamo_metrics,
    get_model_name,
    get_rank,
    neuron_backend,
    reset_dynamo_metrics,
    set_model_name,
)


def test_helpers_are_the_compiler_objects():
    assert neuron_backend is compiler.neuron_backend
    assert get_dynamo_metrics is torch_neuronx.get_dynamo_metrics is compiler.get_dynamo_metrics
    assert reset_dynamo_metrics is torch_neuronx.reset_dynamo_metrics
    assert NEFFCompilationError is __import__("torch_neuronx.compiler._backend").compiler._backend.NeuronCompileError
    assert torch_neuronx.neuron_dynamo_backend.neuron_backend is neuron_backend


def test_backend_callable_counts_in_metrics():
    reset_dynamo_metrics()
    x, y = neuron_randn(2, 8), neuron_randn(2, 8, seed=1)
    out = torch.compile(elementwise, backend=neuron_backend)(x, y)
    assert torch.equal(out.cpu(), elementwise(x.cpu(), y.cpu()))
    metrics = get_dynamo_metrics()  # built now, or served by the compile cache of an earlier test's graph
    assert metrics["graphs_compiled"] + metrics["cache_hits_memory"] == 1, metrics


def test_set_model_name_names_artifacts(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", "1")
    monkeypatch.setenv("TORCH_NEURONX_DEBUG_DIR", str(tmp_path))
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_NEFF_CACHE", "1")
    monkeypatch.setenv("RANK", "2")
    assert get_rank() == 2
    previous = get_model_name()
    set_model_name("my_llama")
    try:
        assert get_model_name() == "my_llama"
        torch.compile(elementwise, backend="neuron")(neuron_randn(2, 8), neuron_randn(2, 8, seed=1))
    finally:
        set_model_name(previous)
    files = os.listdir(tmp_path / "fx_graphs" / "proc_2")
    assert len(files) == 1 and files[0].startswith("my_llama_"), files


def test_set_model_name_rejects_a_path():
    with pytest.raises(options.NeuronCompileOptionError, match="set_model_name"):
        set_model_name("../x")
