"""TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS=1 keeps FX graphs and generated
code under TORCH_NEURONX_DEBUG_DIR, one folder per rank."""
from __future__ import annotations

import os

import torch

import torch_neuronx
from tests.compiler.conftest import elementwise, neuron_randn


def test_artifacts_kept_per_rank(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", "1")
    monkeypatch.setenv("TORCH_NEURONX_DEBUG_DIR", str(tmp_path))
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_NEFF_CACHE", "1")  # force a real compile
    monkeypatch.setenv("RANK", "3")
    x, y = neuron_randn(2, 8), neuron_randn(2, 8, seed=1)
    torch.compile(elementwise, backend="neuron", options={"model_name": "tiny"})(x, y)
    fx_files = os.listdir(tmp_path / "fx_graphs" / "proc_3")
    assert len(fx_files) == 1 and fx_files[0].startswith("tiny_") and fx_files[0].endswith(".fx.txt")
    assert "relu" in (tmp_path / "fx_graphs" / "proc_3" / fx_files[0]).read_text()
    code = [os.path.join(d, f) for d, _, files in os.walk(tmp_path / "code" / "proc_3") for f in files]
    assert any(p.endswith("output_code.py") for p in code), code


def test_no_artifacts_by_default(monkeypatch, tmp_path):
    """Artifacts are written only when a graph is really compiled, so the cache is off here: a graph
    cached earlier in the session would leave the folder empty whatever the default."""
    monkeypatch.delenv("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", raising=False)
    monkeypatch.setenv("TORCH_NEURONX_DEBUG_DIR", str(tmp_path))
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_NEFF_CACHE", "1")
    torch.compile(elementwise, backend="neuron")(neuron_randn(2, 8), neuron_randn(2, 8))
    metrics = torch_neuronx.get_dynamo_metrics()
    assert metrics["graphs_compiled"] == 1 and metrics["cache_misses"] == 1, metrics
    assert os.listdir(tmp_path) == []
