"""Compile-only mode (TORCH_NEURONX_COMPILE_ONLY=1): a graph compiles and fills the cache, and its
calls write nothing: inputs keep their values, outputs are uninitialised tensors of the right shape."""
from __future__ import annotations

import os

import pytest
import torch

from torch_neuronx.compiler import _cache, _compile_log as compile_log


def bump(x):
    x.add_(1)          # an input mutation: the compiled program writes x
    return x * 2


def test_compiles_fills_the_cache_and_does_not_execute(monkeypatch, tmp_path):
    import torch._dynamo

    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TORCH_NEURONX_COMPILE_ONLY", "1")
    start = compile_log.count()
    x = torch.zeros(4, 8, device="neuron")
    out = torch.compile(bump, backend="neuron", dynamic=False)(x)
    assert torch.equal(x.cpu(), torch.zeros(4, 8))          # nothing written to the input
    assert out.shape == (4, 8) and out.device == x.device and out.dtype == x.dtype
    (rec,) = compile_log.records(start)
    assert rec.source == "compiled" and not rec.warm
    root = os.path.join(str(tmp_path), f"torch-{torch.__version__}")
    assert compile_log.is_warm(root, rec.key)               # the warm index holds it
    assert os.listdir(os.path.join(root, "fxgraph"))        # Inductor's cache entry was written

    # the same graph for real, in a fresh Dynamo and memory cache: served by the cache compile-only filled
    monkeypatch.delenv("TORCH_NEURONX_COMPILE_ONLY")
    torch._dynamo.reset()
    _cache.clear_memory_cache()
    start = compile_log.count()
    out = torch.compile(bump, backend="neuron", dynamic=False)(x)
    (again,) = compile_log.records(start)
    assert again.warm and again.key == rec.key and again.source == "disk cache"
    assert torch.equal(x.cpu(), torch.ones(4, 8)) and torch.equal(out.cpu(), torch.full((4, 8), 2.0))


def test_a_training_step_runs_through_without_executing(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_COMPILE_ONLY", "1")
    lin = torch.nn.Linear(8, 4).to("neuron")
    before = lin.weight.detach().cpu().clone()
    step = torch.compile(lambda t: lin(t).square().mean(), backend="neuron", dynamic=False)
    loss = step(torch.ones(2, 8, device="neuron"))
    assert loss.shape == () and loss.requires_grad
    loss.backward()                                        # backward connects; its gradients are uninitialised
    assert lin.weight.grad is not None and lin.weight.grad.shape == lin.weight.shape
    assert torch.equal(lin.weight.detach().cpu(), before)


def test_a_bad_value_names_the_variable(monkeypatch):
    from torch_neuronx.runtime.env import NeuronEnvironmentError

    monkeypatch.setenv("TORCH_NEURONX_COMPILE_ONLY", "maybe")
    with pytest.raises(Exception) as info:   # Dynamo wraps a backend's error in BackendCompilerFailed
        torch.compile(bump, backend="neuron", dynamic=False)(torch.zeros(2, device="neuron"))
    assert "TORCH_NEURONX_COMPILE_ONLY='maybe' is not a switch" in str(info.value)
    assert NeuronEnvironmentError.__name__ in str(info.value) or isinstance(info.value, NeuronEnvironmentError)
