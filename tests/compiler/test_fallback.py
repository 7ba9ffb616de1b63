"""A failed compile raises, naming the op (default), or runs the graph eagerly
with a warning when fallback execution is on (option or environment)."""
from __future__ import annotations

import pytest
import torch

import torch_neuronx
from tests.compiler.conftest import elementwise, neuron_randn


@torch.library.custom_op("neuron_fallback_test::double", mutates_args=())
def _double(t: torch.Tensor) -> torch.Tensor:
    """An op Inductor has no lowering for: compiled only through an implicit fallback kernel."""
    return t * 2


@_double.register_fake
def _(t):
    return torch.empty_like(t)


def _with_unlowered_op(x, y):
    return elementwise(_double(x), y)


@pytest.fixture
def failing_compile(monkeypatch):
    """A real lowering failure: with Inductor's implicit fallbacks off, the op above has no lowering
    and Inductor raises MissingOperatorWithoutDecomp while lowering the graph."""
    import torch._inductor.config as inductor_config

    monkeypatch.setenv("TORCH_NEURONX_DISABLE_NEFF_CACHE", "1")  # no cached program may hide the failure
    # the config's own patch, not monkeypatch: on torch 2.14+ (an ImplicationConfigModule) monkeypatch's
    # undo leaves `implicit_fallbacks` unreadable, so every later use of this fixture failed in setup
    with inductor_config.patch(implicit_fallbacks=False):
        yield _with_unlowered_op


def _run(fn=elementwise, **compile_kwargs):
    x, y = neuron_randn(2, 8), neuron_randn(2, 8, seed=1)
    return torch.compile(fn, backend="neuron", **compile_kwargs)(x, y), fn(x, y)


def test_default_raises_and_names_the_op(failing_compile, monkeypatch):
    monkeypatch.delenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", raising=False)
    with pytest.raises(Exception, match=r"at op neuron_fallback_test.double.default: .*"
                                         r"MissingOperatorWithoutDecomp") as info:
        _run(failing_compile)
    assert "fallback_execution" in str(info.value)
    assert torch_neuronx.compiler.get_dynamo_metrics()["compile_failures"]


def test_option_fallback_execution_runs_eagerly_with_warning(failing_compile):
    with pytest.warns(RuntimeWarning, match="running it eagerly"):
        out, expected = _run(failing_compile, options={"fallback_execution": True})
    torch.testing.assert_close(out, expected)
    assert torch_neuronx.compiler.get_dynamo_metrics()["fallbacks"] == 1


def test_env_var_zero_enables_fallback(failing_compile, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "0")
    with pytest.warns(RuntimeWarning, match="running it eagerly"):
        out, expected = _run(failing_compile)
    torch.testing.assert_close(out, expected)


def test_option_overrides_env_var(failing_compile, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "0")
    with pytest.raises(Exception, match="could not compile"):
        _run(failing_compile, options={"fallback_execution": False})


def test_bad_values_are_named(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "maybe")
    with pytest.raises(Exception, match="TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION='maybe'"):
        _run()
    monkeypatch.delenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION")
    torch._dynamo.reset()
    with pytest.raises(Exception, match="fallback_execution.*must be a bool"):
        _run(options={"fallback_execution": "yes"})
