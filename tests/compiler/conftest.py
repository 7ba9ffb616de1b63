"""Compiler tests share one compile-cache folder per session, so the C++ kernels
of the tiny models below are built once; tests that need a cold cache use their own."""
from __future__ import annotations

import os

import pytest
import torch

import torch_neuronx.compiler as compiler


@pytest.fixture(scope="session", autouse=True)
def _session_cache_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("neff_cache"))
    old = os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR")
    os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = path
    yield path
    if old is None:
        os.environ.pop("TORCH_NEURONX_NEFF_CACHE_DIR", None)
    else:
        os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = old


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    import torch._dynamo

    torch._dynamo.reset()
    compiler.reset_dynamo_metrics()
    yield
    torch._dynamo.reset()


def elementwise(x, y):
    """The tiny graph most tests compile (one fused kernel, built once per session)."""
    return (torch.relu(x) * y).sin() + 1


def neuron_randn(*shape, seed=0, requires_grad=False):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to("neuron").requires_grad_(requires_grad)
