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


def pytest_configure(config):
    """A missing test dependency fails the run (exit 4) instead of skipping what needs it."""
    missing = missing_test_dependencies()
    if missing:
        raise pytest.UsageError("missing test dependencies (pip install -e '.[test]'):\n  "
                                + "\n  ".join(missing))


def shared_setup_group(item) -> str | None:
    """The xdist group (`--dist loadgroup`, pyproject addopts) of a test whose expensive setup is shared:
    with plain `load` scheduling the tests of one module land on both workers and each worker builds the
    module- or session-scoped fixture again (the SFT fixtures are 4-rank torchrun launches). A test that
    uses a session fixture of a tests/ conftest groups with every other user of that folder's fixtures;
    one that uses a module fixture groups with its module. Autouse fixtures (cheap folder settings) and
    fixtures of pytest and its plugins do not group."""
    group = None
    for defs in item._fixtureinfo.name2fixturedefs.values():
        fixturedef = defs[-1]
        if fixturedef.scope not in ("module", "session") or not fixturedef.baseid.startswith("tests"):
            continue
        if fixturedef.argname in item.session._fixturemanager._getautousenames(item):
            continue
        if fixturedef.scope == "session":
            return fixturedef.baseid.split("::")[0].rsplit("/", 1)[0] if fixturedef.baseid.endswith(".py") \
                else fixturedef.baseid
        group = item.nodeid.split("::")[0]
    return group


def pytest_collection_modifyitems(config, items):
    for item in items:
        group = shared_setup_group(item)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))


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
