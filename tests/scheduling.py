"""How the suite's tests are shared between the xdist workers (tests/conftest.py installs both hooks).

Two rules, for CI's two workers:

- A test file is one unit of work, run whole by one worker, so the module- and session-scoped fixtures
  its tests share (SFT runs, torchrun launches, tiny models) are built once, not once per worker. Plain
  `--dist load` hands out consecutive tests and often split a file between the workers, who then both
  built its fixtures. Only the sweeps below, hundreds of short independent tests, go out one test at a time.
- The longest files start first and the short ones fill in at the end (longest-processing-time-first),
  so no worker is left with a long test while the other is idle. `--dist loadgroup` without an order
  made one worker finish a big group alone at the end.

SECONDS holds approximate times of the slow files on CI (one worker each, the other busy). Only their
order matters, so rough figures are fine; a file not listed starts after the listed ones. Refresh them
from a full run with `--durations=300`, adding up each file's setup and call times.
"""
from __future__ import annotations

import pytest

# Hundreds of short tests with nothing expensive shared: handed out one test at a time, at the end.
PER_TEST = ("tests/device/test_op_sweep.py", "tests/device/test_module_sweep.py")

SECONDS: dict[str, float] = {}


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def longest_files_first(items: list) -> None:
    """Reorder `items` in place: listed files by SECONDS (longest first), then the others in collection
    order, then the PER_TEST sweeps; each file's own tests keep their order (its fixtures' scopes)."""
    first_seen: dict[str, int] = {}
    for item in items:
        first_seen.setdefault(_file(item.nodeid), len(first_seen))

    def key(item):
        path = _file(item.nodeid)
        return (path in PER_TEST, -SECONDS.get(path, 0.0), first_seen[path])

    items.sort(key=key)  # stable: the order within a file is kept


def make_scheduler(config, log):
    """`--dist load` (pyproject's addopts) becomes file units in the collection order set above; an
    explicit other `--dist` is left to xdist."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = _file(nodeid)
            return nodeid if path in PER_TEST else path

    config.option.loadscopereorder = False  # keep longest_files_first's order (not "most tests first")
    return FileUnits(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    return make_scheduler(config, log)


def pytest_collection_modifyitems(config, items):
    longest_files_first(items)
