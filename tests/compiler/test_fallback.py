"""A failed compile raises, naming the op (default), or runs the graph eagerly
with a warning when fallback execution is on (option or environment)."""
from __future__ import annotations

import pytest
import torch

import torch_neuronx
from torch_neuronx.compiler import backend
from tests.compiler.conftest import elementwise, neuron_randn


class _LoweringFailure(RuntimeError):
    target = "aten.fake_unsupported_op.default"


@pytest.fixture
def failing_compile(monkeypatch):
    def fail(*args, **kwargs):
        raise _LoweringFailure("no lowering for this op on the virtual core")

    monkeypatch.setattr(backend, "_inductor_compile", fail)
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_NEFF_CACHE", "1")  # no cached program may hide the failure


def _run(**compile_kwargs):
    x, y = neuron_randn(2, 8), neuron_randn(2, 8, seed=1)
    return torch.compile(elementwise, backend="neuron", **compile_kwargs)(x, y), elementwise(x, y)


def test_default_raises_and_names_the_op(failing_compile, monkeypatch):
    monkeypatch.delenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", raising=False)
    with pytest.raises(Exception, match=r"aten.fake_unsupported_op.default.*no lowering") as info:
        _run()
    assert "fallback_execution" in str(info.value)
    assert torch_neuronx.compiler.get_dynamo_metrics()["compile_failures"]


def test_option_fallback_execution_runs_eagerly_with_warning(failing_compile):
    with pytest.warns(RuntimeWarning, match="running it eagerly"):
        out, expected = _run(options={"fallback_execution": True})
    torch.testing.assert_close(out, expected)
    assert torch_neuronx.compiler.get_dynamo_metrics()["fallbacks"] == 1


def test_env_var_zero_enables_fallback(failing_compile, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "0")
    with pytest.warns(RuntimeWarning, match="running it eagerly"):
        out, expected = _run()
    torch.testing.assert_close(out, expected)


def test_option_overrides_env_var(failing_compile, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "0")
    with pytest.raises(Exception, match="could not compile"):
        _run(options={"fallback_execution": False})


def test_bad_values_are_named(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "maybe")
    with pytest.raises(Exception, match="TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION='maybe'"):
        _run()
    monkeypatch.delenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION")
    torch._dynamo.reset()
    with pytest.raises(Exception, match="fallback_execution.*must be a bool"):
        _run(options={"fallback_execution": "yes"})
