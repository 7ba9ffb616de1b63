"""Fixtures of the tool tests: a private runtime folder and a worker process
that uses two NeuronCores and keeps running until the test lets it go."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

WORKER = textwrap.dedent("""
    import sys, time, torch
    a = torch.ones(256, 256, device="neuron:0")
    b = torch.ones(1 << 20, dtype=torch.uint8, device="neuron:1")
    print("ready", flush=True)
    while True:   # busy until stdin says stop or closes (the test process ended)
        for _ in range(5):
            c = a @ a
            d = (c + 1).relu()
        import select
        # a light duty cycle, not a spin: the tools only need utilization above 0, and a spinning
        # worker took a core share from every test running beside it on CI's two cores
        if select.select([sys.stdin], [], [], 0.05)[0]:
            break
""")


def launch_worker(runtime_dir, code: str = WORKER) -> subprocess.Popen:
    full = dict(os.environ, TORCH_NEURONX_RUNTIME_DIR=str(runtime_dir))
    return subprocess.Popen([sys.executable, "-c", code], env=full, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_ready(proc: subprocess.Popen) -> subprocess.Popen:
    line = proc.stdout.readline()
    assert line.strip() == "ready", proc.stderr.read()
    return proc


def start_worker(runtime_dir, code: str = WORKER) -> subprocess.Popen:
    return wait_ready(launch_worker(runtime_dir, code))


def stop_worker(proc: subprocess.Popen) -> None:
    try:
        proc.stdin.write("stop\n")
        proc.stdin.flush()
    except (BrokenPipeError, ValueError):
        pass
    proc.wait(timeout=60)


def samples_around_work(runtime_dir, pid: int, deadline_s: float = 300.0):
    """Two samples of the runtime folder with ops of `pid` on neuron:0 between them. A fixed sleep
    between the samples is not enough on a loaded host (the worker may not run at all in it); this
    waits for the work itself, and only a worker that hangs reaches the deadline."""
    from torch_neuronx.tools.api.collector import take_sample

    def ops(sample):
        entry = sample.processes.get(pid)
        return entry.devices.get(0, {}).get("ops", 0) if entry else 0

    before = take_sample(runtime_dir)
    end = time.monotonic() + deadline_s
    while True:
        time.sleep(0.3)
        after = take_sample(runtime_dir)
        if ops(after) > ops(before) or time.monotonic() > end:
            return before, after


@pytest.fixture(scope="session")
def runtime_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("neuron-runtime")


@pytest.fixture(scope="module")   # one per tools file: a session-scoped one ran (busy) until its xdist worker ended
def worker(runtime_dir):
    proc = start_worker(runtime_dir)
    samples_around_work(runtime_dir, proc.pid)  # it has run ops (and says so in its runtime file)
    yield proc
    stop_worker(proc)


@pytest.fixture
def use_runtime_dir(runtime_dir, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_RUNTIME_DIR", str(runtime_dir))
    return runtime_dir
