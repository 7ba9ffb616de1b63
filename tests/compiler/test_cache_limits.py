"""docs/compile.md, "Environment variables" and "Compile cache": the lock timeout reaches Inductor's file locks,
NEURON_COMPILATION_CACHE_MAX_ENTRIES bounds the in-memory cache (LRU), ranks sharing one cache folder write
whole entries, and unknown options warn and are ignored."""
from __future__ import annotations

import os

import pytest
import torch

import torch_neuronx
from tests.compiler.conftest import elementwise, neuron_randn
from torch_neuronx.compiler import _cache as cache, _options as options


def _compile(shape):
    torch._dynamo.reset()  # Dynamo forgets the frame, so the backend's caches decide
    x, y = neuron_randn(*shape), neuron_randn(*shape, seed=1)
    torch.testing.assert_close(torch.compile(elementwise, backend="neuron")(x, y), elementwise(x, y))


def test_lock_timeout_is_what_inductor_waits_for(monkeypatch):
    import torch._inductor.codecache as codecache
    import torch._inductor.config as inductor_config

    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT", "7")
    opts = options.resolve()
    assert opts.lock_timeout == 7
    before = codecache.LOCK_TIMEOUT
    with cache.disk_session(opts):  # what every neuron compile runs inside
        assert codecache.LOCK_TIMEOUT == 7 and inductor_config.file_lock_timeout == 7
    assert codecache.LOCK_TIMEOUT == before  # the process's own Inductor setting comes back
    assert options.resolve().lock_timeout == 7
    monkeypatch.delenv("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT")
    assert options.resolve().lock_timeout == 1200  # documented default
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT", "0")
    with pytest.raises(options.NeuronCompileOptionError, match="TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT='0'"):
        options.resolve()


@pytest.mark.parametrize("limit,memory_hits", [("1", 0), ("2", 1)])
def test_max_entries_bounds_the_memory_cache(monkeypatch, limit, memory_hits):
    """Shapes A, B, then A again: with room for one program A was evicted by B; with two it is served."""
    monkeypatch.setenv("NEURON_COMPILATION_CACHE_MAX_ENTRIES", limit)
    cache.clear_memory_cache()
    for shape in ((3, 5), (4, 5), (3, 5)):
        _compile(shape)
        assert cache.memory_cache_size() <= int(limit)
    metrics = torch_neuronx.compiler.get_dynamo_metrics()
    assert metrics["cache_hits_memory"] == memory_hits, metrics
    assert metrics["graphs_compiled"] == 3 - memory_hits, metrics


def test_zero_entries_keeps_nothing_in_memory(monkeypatch):
    monkeypatch.setenv("NEURON_COMPILATION_CACHE_MAX_ENTRIES", "0")
    cache.clear_memory_cache()
    _compile((3, 5))
    _compile((3, 5))
    assert cache.memory_cache_size() == 0
    assert torch_neuronx.compiler.get_dynamo_metrics()["cache_hits_memory"] == 0


def test_unknown_options_warn_and_are_ignored():
    x, y = neuron_randn(2, 8), neuron_randn(2, 8, seed=1)
    with pytest.warns(UserWarning, match=r"ignores unknown options \['max_autotune', 'no_such_option'\]"):
        out = torch.compile(elementwise, backend="neuron",
                            options={"no_such_option": 1, "max_autotune": True})(x, y)
    torch.testing.assert_close(out, elementwise(x, y))


# Several processes writing one cache folder at once (atomic, sealed entries) is tested with four
# processes, after a killed compile, in tests/reliability/test_signals_and_cache.py.
