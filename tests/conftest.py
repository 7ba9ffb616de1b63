"""Shared helpers: most device behaviour depends on environment variables read
when torch starts, so those tests run a fresh interpreter."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from tests.dependencies import missing_test_dependencies
# Which worker runs what: whole files, longest first (tests/scheduling.py).
from tests.scheduling import pytest_collection_modifyitems, pytest_xdist_make_scheduler  # noqa: F401


def pytest_configure(config):
    """A missing test dependency fails the run (exit 4) instead of skipping what needs it.
    Checked once, in the controlling process (xdist workers inherit its environment)."""
    if hasattr(config, "workerinput"):
        return
    missing = missing_test_dependencies()
    if missing:
        raise pytest.UsageError("missing test dependencies (pip install -e '.[test]'):\n  "
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
