"""Shared helpers: most device behaviour depends on environment variables read
when torch starts, so those tests run a fresh interpreter."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

# The suite compares neuron results with the CPU's bit for bit, so bf16/fp16 matmuls run the CPU's
# own kernel on every host (on a host without native bf16 GEMMs `auto` would accumulate in fp32).
# Set before torch loads the device; tests of the other modes set theirs
# (tests/device/test_low_precision_gemm.py, tests/compiler/test_low_precision_gemm.py).
os.environ.setdefault("TORCH_NEURONX_HOST_LOW_PRECISION_GEMM", "native")

import pytest  # noqa: E402
import torch  # noqa: E402

from tests.dependencies import missing_test_dependencies  # noqa: E402
# Which worker runs what: whole files, longest first (tests/scheduling.py).
from tests.scheduling import pytest_collection_modifyitems, pytest_xdist_make_scheduler  # noqa: F401,E402


def pytest_configure(config):
    """A missing test dependency fails the run (exit 4) instead of skipping what needs it.
    Checked once, in the controlling process (xdist workers inherit its environment)."""
    if hasattr(config, "workerinput"):
        return
    # `-m vllm` runs in the vLLM environment (.ci/vllm), whose list is the `vllm-test` extra
    extra = "vllm-test" if config.getoption("markexpr", "") == "vllm" else "test"
    missing = missing_test_dependencies(extra=extra)
    if missing:
        raise pytest.UsageError(f"missing test dependencies (pip install -e '.[{extra}]'):\n  "
                                + "\n  ".join(missing))


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = 180,
               unset: tuple[str, ...] = (), flags: tuple[str, ...] = (), cwd: str | None = None) -> subprocess.CompletedProcess:
    full_env = dict(os.environ)
    for key in unset:
        full_env.pop(key, None)
    full_env.update(env or {})
    return subprocess.run([sys.executable, *flags, "-c", textwrap.dedent(code)], env=full_env,
                          capture_output=True, text=True, timeout=timeout, cwd=cwd)


@pytest.fixture
def python_subprocess():
    return run_python


@pytest.fixture(autouse=True)
def _neuron_device_zero():
    """Each test starts on neuron:0 with fresh peak statistics."""
    torch.neuron.set_device(0)
    yield
    torch.neuron.set_device(0)
