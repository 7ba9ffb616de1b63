"""Fixtures for NKI on torch: small kernels shared by the tests."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")      # Hub kernel tests never reach the network

import pytest
import torch

import nki
import nki.language as nl
from nki.examples.tensor_add import tensor_add_tile as add_kernel  # noqa: F401  (c = a + b, one tile)

_ENV = ("NKI_SIMULATOR", "NEURON_PLATFORM_TARGET_OVERRIDE", "NKI_PRECISE_FP", "NKI_CHECK_CAPACITY",
        "LOCAL_KERNELS")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for k in _ENV:
        monkeypatch.delenv(k, raising=False)


@nki.jit
def scale_kernel(a, alpha):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.multiply(nl.load(a), alpha))
    return out


@nki.jit(mutable_args=("x",))
def add_inplace_kernel(x, y):
    nl.store(x, nl.add(nl.load(x), nl.load(y)))


@nki.jit
def sum_and_max_kernel(a):
    """Two outputs of another shape and dtype: row sums (fp32) and row maxima."""
    P = a.shape[0]
    s = nl.ndarray((P, 1), nl.float32, buffer=nl.shared_hbm)
    m = nl.ndarray((P, 1), a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    nl.store(s, nl.sum(t, axis=1, keepdims=True, dtype=nl.float32))
    nl.store(m, nl.max(t, axis=1, keepdims=True))
    return s, m


@nki.jit
def tile_add_kernel(a, b):
    """SPMD: program i adds rows [32 i, 32 i + 32)."""
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    rows = slice(32 * i, 32 * i + 32)
    nl.store(out[rows], nl.add(nl.load(a[rows]), nl.load(b[rows])))
    return out


@pytest.fixture
def kernels_mod():
    import sys
    return sys.modules[__name__]


def neuron(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=g).to(dtype).to("neuron")
