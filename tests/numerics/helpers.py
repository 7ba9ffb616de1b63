"""Numerics modes are read at startup: each test file runs its checks in one
fresh interpreter per mode and reads back a JSON dict the child prints last."""
from __future__ import annotations

import json

from tests.conftest import run_python

MARK = "RESULT "


def run_mode(code: str, env: dict, timeout: float = 240):
    """Run `code` (which must define a dict `result`) with `env`; return (result, stderr)."""
    prog = code + f"\nimport json as _j\nprint({MARK!r} + _j.dumps(result, default=str))\n"
    proc = run_python(prog, env=env, timeout=timeout)
    lines = [l for l in proc.stdout.splitlines() if l.startswith(MARK)]
    assert proc.returncode == 0 and lines, f"child failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return json.loads(lines[-1][len(MARK):]), proc.stderr
