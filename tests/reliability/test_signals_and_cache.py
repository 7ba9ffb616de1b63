"""Signals and the compile cache: SIGINT during a long eager op and during a
neuron compile raises KeyboardInterrupt as on CPU (no abort, no hang) and
leaves tensors and later compiles working; uncaught, it ends the process the
usual way (killed by SIGINT). A compile killed with SIGKILL leaves nothing a
fresh process would be served; four processes compiling one graph into one
cache folder at once all succeed with equal results and leave only whole,
sealed entries, which a later process hits. (Two processes:
tests/compiler/test_cache_limits.py.)"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import torch

import torch_neuronx
from tests.reliability._compile_child import tiny_graph, tiny_input
from tests.reliability.hostile import passed, raised, run_cases
from torch_neuronx.compiler import _cache as cache

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

INTERRUPT = """
import os, signal, threading, time, torch

# Python turns SIGINT into KeyboardInterrupt only if the process did not start with SIGINT ignored,
# and a non-interactive shell's background job (`cmd &`) does start so: the Ctrl-C of a terminal's
# foreground process, which these cases model, needs the handler whatever launched pytest.
signal.signal(signal.SIGINT, signal.default_int_handler)

def interrupt_after(seconds):
    threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT)).start()

x = torch.randn(600, 600, device="neuron")
kept = x.cpu()
"""


def test_sigint_during_eager_op_and_compile():
    results = run_cases(INTERRUPT + """
with case("long eager op interrupted"):
    interrupt_after(0.3)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # each matrix_power is a long run of device matmuls
        torch.linalg.matrix_power(x, 40)
with case("tensors usable after the interrupt"):
    assert torch.equal(x.cpu(), kept)
    torch.testing.assert_close((x @ x).cpu(), kept @ kept, rtol=1e-4, atol=1e-3)

def graph(a):
    return (torch.relu(a) * 2).sum(0)

compiled = torch.compile(graph, backend="neuron")
import torch_neuronx.compiler._cache as neuron_cache
_graph_key = neuron_cache.graph_key

def _interrupting_graph_key(*args, **kwargs):
    # SIGINT arrives while the compile runs, every time (not a timer racing the compile).
    neuron_cache.graph_key = _graph_key
    os.kill(os.getpid(), signal.SIGINT)
    return _graph_key(*args, **kwargs)

with case("compile interrupted") as record:
    neuron_cache.graph_key = _interrupting_graph_key
    compiled(x)
    record["finished first"] = True  # the compile beat the signal: the case is not what it says
    time.sleep(60)
with case("compile after the interrupt"):
    torch.testing.assert_close(compiled(x).cpu(), graph(kept))
""", timeout=300)
    raised(results, "long eager op interrupted", "KeyboardInterrupt")
    passed(results, "tensors usable after the interrupt")
    raised(results, "compile interrupted", "KeyboardInterrupt")
    assert "finished first" not in results["compile interrupted"], "the compile finished before SIGINT arrived"
    passed(results, "compile after the interrupt")


def test_uncaught_sigint_during_eager_op_ends_the_usual_way():
    # Python re-raises an uncaught KeyboardInterrupt as death by SIGINT (what a shell expects).
    results = run_cases(INTERRUPT + """
print("RUNNING", flush=True)
interrupt_after(0.3)
while True:
    torch.linalg.matrix_power(x, 40)
""", timeout=120, expect_exit=-signal.SIGINT)
    assert "KeyboardInterrupt" in results["_stderr"]["message"]
    assert "Abort" not in results["_stderr"]["message"] and "terminate called" not in results["_stderr"]["message"]


def _start(folder, barrier, world, *extra):
    return subprocess.Popen([sys.executable, "-m", "tests.reliability._compile_child", str(barrier), str(world),
                             *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, "TORCH_NEURONX_NEFF_CACHE_DIR": str(folder),
                                 "TORCHINDUCTOR_COMPILE_THREADS": "1"})


def test_killed_compile_then_concurrent_compiles_then_a_hit(tmp_path, monkeypatch):
    folder, barrier = tmp_path / "cache", tmp_path / "barrier"
    barrier.mkdir()
    expected = tiny_graph(tiny_input("cpu"))

    # 1. A compile killed mid-way (SIGKILL leaves no chance to clean up), at the worst moment:
    # Inductor's entries are written, not yet sealed.
    victim = _start(folder, barrier, 1, "hold")
    assert victim.stdout.readline().strip() == "COMPILING", victim.communicate(timeout=60)
    assert victim.stdout.readline().strip() == "WRITTEN", victim.communicate(timeout=60)
    assert list(cache._entry_files(str(folder / f"torch-{torch.__version__}"))), "nothing was written before the kill"
    victim.kill()
    out, _ = victim.communicate(timeout=60)
    assert victim.returncode == -signal.SIGKILL and "RESULT" not in out, "the compile ended before the kill"

    # 2. Two fresh processes compile the same graph into the same folder at once (after a barrier):
    # two writers race for one entry as four would; on CI's 2 cores four only queued for the CPU.
    procs = [_start(folder, barrier, 2) for _ in range(2)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=400)
        assert proc.returncode == 0, err[-3000:]
        results.append(json.loads(out.split("RESULT", 1)[1]))
    assert all(r["out"] == results[0]["out"] for r in results), results
    torch.testing.assert_close(torch.tensor(results[0]["out"]), expected)

    # 3. The folder holds only whole entries, each sealed and matching its checksum.
    root = str(folder / f"torch-{torch.__version__}")
    entries = list(cache._entry_files(root))
    assert entries
    assert [os.path.join(d, f) for d, _, files in os.walk(root) for f in files if ".tmp" in f] == []
    assert all(os.path.exists(p + cache._SIDECAR) for p in entries)
    assert cache.verify_entries(root) == []

    # 4. A later process (this one) is served from the folder.
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(folder))
    torch._dynamo.reset()
    cache.clear_memory_cache()
    before = torch_neuronx.compiler.get_dynamo_metrics()
    out = torch.compile(tiny_graph, backend="neuron")(tiny_input())
    after = torch_neuronx.compiler.get_dynamo_metrics()
    torch.testing.assert_close(out.cpu(), expected)
    assert after["cache_hits_disk"] - before["cache_hits_disk"] == 1, (before, after)
    assert after["cache_misses"] == before["cache_misses"], (before, after)
