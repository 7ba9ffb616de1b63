"""Shared fixtures for the nki simulator tests."""
import os
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

_ENV = ("NKI_SIMULATOR", "NEURON_PLATFORM_TARGET_OVERRIDE", "NKI_PRECISE_FP",
        "NKI_DMA_TRANSPOSE_AS_PE_TRANSPOSE", "NKI_CHECK_CAPACITY")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for k in _ENV:
        monkeypatch.delenv(k, raising=False)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def expect_code():
    """expect_code(code, kernel, *args, **kw): simulate and assert the NKI error code."""
    import nki

    def check(code, kernel, *args, **kw):
        with pytest.raises(nki.NkiValidationError) as ei:
            nki.simulate(kernel)(*args, **kw)
        assert ei.value.code == code, str(ei.value)
        assert isinstance(ei.value, AssertionError)
        return ei.value
    return check
