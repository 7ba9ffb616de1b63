"""torch.compile(f) with no backend= on neuron inputs compiles with the neuron backend
(TorchNeuron: "auto-selected when running on a Neuron device"); TORCH_NEURONX_DEFAULT_COMPILE_BACKEND=0
keeps Inductor."""
from __future__ import annotations

import logging

import pytest
import torch

import torch_neuronx
from tests.compiler.conftest import elementwise, neuron_randn
from torch_neuronx.compiler import _default_backend as default_backend

ENV = "TORCH_NEURONX_DEFAULT_COMPILE_BACKEND"


@pytest.fixture(autouse=True)
def _fresh_notice(monkeypatch):
    monkeypatch.setattr(default_backend, "_said", {"routed": False, "ignored": set()})
    monkeypatch.delenv(ENV, raising=False)


def test_no_backend_on_neuron_inputs_uses_the_neuron_backend():
    x, y = neuron_randn(2, 8), neuron_randn(2, 8, seed=1)
    out = torch.compile(elementwise)(x, y)
    assert torch.equal(out.cpu(), elementwise(x.cpu(), y.cpu()))
    metrics = torch_neuronx.get_dynamo_metrics()
    # one graph through the neuron backend: compiled (a disk-cache hit is a compile served from the disk cache,
    # counted in both graphs_compiled and cache_hits_disk: warm when an earlier test compiled the same graph)
    # or served from memory
    assert metrics["graphs_compiled"] + metrics["cache_hits_memory"] == 1, metrics
    assert metrics["cache_hits_disk"] <= metrics["graphs_compiled"], metrics


def test_shape_change_recompiles_static_programs():
    f = torch.compile(elementwise)
    for n in (4, 6, 8):
        x, y = neuron_randn(2, n), neuron_randn(2, n, seed=1)
        torch.testing.assert_close(f(x, y).cpu(), elementwise(x.cpu(), y.cpu()))
    assert torch_neuronx.get_dynamo_metrics()["recompilations"] >= 2


def test_cpu_inputs_stay_with_inductor():
    x, y = torch.randn(2, 8), torch.randn(2, 8)
    torch.testing.assert_close(torch.compile(elementwise)(x, y), elementwise(x, y))
    assert torch_neuronx.get_dynamo_metrics()["graphs_compiled"] == 0


def test_switch_off_keeps_inductor_on_neuron(monkeypatch):
    monkeypatch.setenv(ENV, "0")
    x, y = neuron_randn(2, 8), neuron_randn(2, 8, seed=1)
    out = torch.compile(elementwise)(x, y)
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), elementwise(x.cpu(), y.cpu()))
    assert torch_neuronx.get_dynamo_metrics()["graphs_compiled"] == 0


def test_bad_switch_value_names_the_variable(monkeypatch):
    monkeypatch.setenv(ENV, "maybe")
    with pytest.raises(Exception, match=ENV):
        torch.compile(elementwise)(neuron_randn(2, 8), neuron_randn(2, 8))


def test_said_once_in_the_log(caplog):
    with caplog.at_level(logging.INFO, logger="torch_neuronx.compiler"):
        torch.compile(elementwise)(neuron_randn(2, 8), neuron_randn(2, 8, seed=1))
        torch.compile(lambda x: x * 3)(neuron_randn(3, 3))
    routed = [r for r in caplog.records if "compiling with backend='neuron'" in r.getMessage()]
    assert len(routed) == 1 and routed[0].levelno == logging.INFO and ENV in routed[0].getMessage()


def test_inductor_modes_are_named_as_ignored(caplog):
    with caplog.at_level(logging.WARNING, logger="torch_neuronx.compiler"):
        out = torch.compile(elementwise, mode="max-autotune-no-cudagraphs")(neuron_randn(2, 8), neuron_randn(2, 8))
    assert out.device.type == "neuron"
    assert any("ignores Inductor's mode/options" in r.getMessage() and "max_autotune" in r.getMessage()
               for r in caplog.records)
