"""Run hostile cases in a fresh interpreter, so a crash or a hang is a test
failure with the child's output, never a broken test run.

`run_cases(body, env)` runs `body` (Python source) after a prelude that defines
`case(name)`: a context manager that prints one JSON line per case, with the
exception type and message it raised (or None), and keeps going. Several cases
share one interpreter where they cannot interfere, to keep the suite fast; the
interpreter must exit 0 (not by a signal) within `timeout` seconds.
"""
from __future__ import annotations

import json
import signal

from tests.conftest import run_python

PRELUDE = '''
import contextlib, json, sys

@contextlib.contextmanager
def case(name):
    record = {"case": name, "error": None, "message": ""}
    try:
        yield record
    except BaseException as err:  # noqa: BLE001 - a hostile case may raise anything but must not crash
        record["error"], record["message"] = type(err).__name__, str(err)
    print("CASE " + json.dumps(record), flush=True)
'''


def _died(returncode: int) -> str:
    if returncode < 0:
        return f"killed by {signal.Signals(-returncode).name}"
    return f"exit code {returncode}"


def run_cases(body: str, env: dict[str, str] | None = None, timeout: float = 240,
              expect_exit: int = 0) -> dict[str, dict]:
    """Run the cases; returns {case name: {"error", "message", ...}}."""
    import textwrap

    proc = run_python(PRELUDE + textwrap.dedent(body), env=env, timeout=timeout)
    assert proc.returncode == expect_exit, (
        f"hostile child {_died(proc.returncode)}; stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    results = {}
    for line in proc.stdout.splitlines():
        if line.startswith("CASE "):
            record = json.loads(line[5:])
            results[record["case"]] = record
    results["_stderr"] = {"message": proc.stderr}
    results["_stdout"] = {"message": proc.stdout}
    return results


def raised(results: dict, name: str, error: str, *needles: str) -> str:
    """Assert case `name` raised `error` with every needle in its message; returns the message."""
    record = results.get(name)
    assert record is not None, f"case {name!r} never finished: {sorted(results)}"
    assert record["error"] == error, f"case {name!r}: expected {error}, got {record}"
    for needle in needles:
        assert needle in record["message"], f"case {name!r}: {needle!r} not in {record['message']!r}"
    return record["message"]


def passed(results: dict, name: str) -> dict:
    record = results.get(name)
    assert record is not None, f"case {name!r} never finished: {sorted(results)}"
    assert record["error"] is None, f"case {name!r} raised: {record}"
    return record
