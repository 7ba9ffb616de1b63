"""Every patch of torch internals refuses, by name, a torch minor version it was not written for.

The unknown version is set on `torch.__version__` (what each check reads) only for the call under test;
each check runs before its patch touches anything, so nothing is patched on the way.
"""
from __future__ import annotations

import contextlib
import os
import re

import pytest
import torch

from torch_neuronx import _torch_versions

UNKNOWN = "2.99.0"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _patch_entry_points():
    from torch_neuronx.compiler import _cache as cache, _cpu_alike as cpu_alike, _fake_conv as fake_conv, _registration as registration, _rng_hops as rng_hops, _vec_isa as vec_isa
    from torch_neuronx.compiler._options import resolve
    from torch_neuronx.distributed import _dynamo_skip, _monitored_barrier
    from torch_neuronx.numerics.dispatch_mode import NumericsMode

    def disk_session():
        with cache.disk_session(resolve()):
            pass

    return {
        "torch_neuronx.compiler._cpu_alike.apply": cpu_alike.apply,
        "torch_neuronx.compiler._fake_conv.install": fake_conv.install,
        "torch_neuronx.compiler._rng_hops.register": rng_hops.register,
        "torch_neuronx.compiler._rng_hops.run_under": lambda: rng_hops.run_under(type("Mode", (), {})),
        "torch_neuronx.compiler._vec_isa.install": vec_isa.install,
        "torch_neuronx.compiler._registration._make_wrapper_codegen": registration._make_wrapper_codegen,
        "torch_neuronx.compiler._cache.disk_session": disk_session,
        "torch_neuronx.distributed._dynamo_skip.install": _dynamo_skip.install,
        "torch_neuronx.distributed._monitored_barrier": lambda: _monitored_barrier._neuron_monitored_barrier(
            None, None, False),
        "torch_neuronx.numerics.dispatch_mode.NumericsMode.skip_dynamo": NumericsMode.skip_dynamo,
    }


@contextlib.contextmanager
def _torch_version(version: str):
    real = torch.__version__
    torch.__version__ = version
    try:
        yield
    finally:
        torch.__version__ = real


@pytest.mark.parametrize("name", sorted(_patch_entry_points()))
def test_patch_refuses_an_unknown_torch_naming_itself(name):
    entry = _patch_entry_points()[name]
    with _torch_version(UNKNOWN), pytest.raises(_torch_versions.UnsupportedTorchVersionError) as err:
        entry()
    message = str(err.value)
    assert name in message and UNKNOWN in message and "2.99" in message


def test_running_torch_is_one_every_patch_knows():
    current = _torch_versions.minor()
    assert current in _torch_versions.TESTED
    for name in _patch_entry_points():
        assert _torch_versions.require(name) == current


def test_minor_reads_local_and_prerelease_versions():
    assert _torch_versions.minor("2.14.1+cu130") == "2.14"
    assert _torch_versions.minor("2.15.0a0+git1234") == "2.15"
    with pytest.raises(_torch_versions.UnsupportedTorchVersionError, match="'nightly'"):
        _torch_versions.minor("nightly")


def test_pyproject_states_the_tested_range():
    """pyproject.toml's torch range (build requires and dependencies) is exactly TESTED."""
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        text = f.read()
    ranges = re.findall(r'"torch>=([\d.]+),<([\d.]+)"', text)
    assert len(ranges) == 2, ranges
    low, high = _torch_versions.TESTED[0], _torch_versions.TESTED[-1]
    major, last = high.split(".")
    assert set(ranges) == {(low, f"{major}.{int(last) + 1}")}
