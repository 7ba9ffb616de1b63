"""Run the client programs (tests/clients/programs/, or a library's own entry point) as a user would.

Each run is a fresh interpreter (import order and launch environment are the point of these tests) in its own
process group with a deadline: on timeout the whole group (launcher and ranks) is killed, so a hung rank
fails the test instead of the suite. `run_all` starts several runs at once (2 cores: the import-heavy
starts overlap) and waits for all of them.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PROGRAMS = os.path.join(HERE, "programs")
TIMEOUT_S = 240


def program(name: str) -> str:
    return os.path.join(PROGRAMS, name)


def env(extra: dict | None = None) -> dict:
    full = dict(os.environ)
    full.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
                OMP_NUM_THREADS="1", PYTHONPATH=REPO, ACCELERATE_DISABLE_RICH="1", TRL_EXPERIMENTAL_SILENCE="1")
    full.update(extra or {})
    return full


def start(cmd: list[str], extra_env: dict | None = None, cwd: str | None = None) -> subprocess.Popen:
    return subprocess.Popen(cmd, env=env(extra_env), cwd=cwd or REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def finish(proc: subprocess.Popen, timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"{' '.join(map(str, proc.args[:6]))}... did not finish in {timeout}s:\n{out[-6000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")


def run(cmd: list[str], extra_env: dict | None = None, timeout: float = TIMEOUT_S, cwd: str | None = None):
    return finish(start(cmd, extra_env, cwd), timeout)


def run_all(runs: list[tuple[list[str], dict | None]], timeout: float = TIMEOUT_S) -> list:
    procs = [start(cmd, extra) for cmd, extra in runs]
    return [finish(p, timeout) for p in procs]


def python(name: str, *args: str) -> list[str]:
    return [sys.executable, program(name), *args]


def result(proc: subprocess.CompletedProcess, tag: str = "RESULT") -> dict:
    """The one `RESULT {json}` line a program prints; the run must have succeeded."""
    lines = [line for line in proc.stdout.splitlines() if line.startswith(tag + " ")]
    assert proc.returncode == 0 and len(lines) == 1, proc.stdout[-8000:]
    return json.loads(lines[0][len(tag) + 1:])
