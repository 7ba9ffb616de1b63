"""Run a function on N ranks, each a spawned process (never forked: the test
process has used the device), joined by a "neuron" process group.

`run_ranks(fn, world)` calls `fn(rank, world, *args)` in every rank after
`init_process_group("neuron")` and `torch.neuron.set_device(rank)`; a failure in
any rank raises here with that rank's traceback. Groups get a short timeout
and the whole run a deadline, so a broken collective fails instead of hanging.
Each rank's stderr goes to its own file with faulthandler on, so a rank killed
by a signal fails the test with its last stderr lines (and every thread's
Python stack) in the message, not in output interleaved with other ranks'.
"""
from __future__ import annotations

import faulthandler
import os
import socket
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

import torch
import torch.multiprocessing as mp

PG_TIMEOUT = timedelta(seconds=60)
DEADLINE_S = 240.0
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_log(log_dir: str, rank: int) -> str:
    return os.path.join(log_dir, f"rank{rank}.stderr")


def _entry(rank, world, init_method, fn, args, pg_timeout, log_dir):
    import torch.distributed as dist

    log = os.open(_rank_log(log_dir, rank), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 2)
    os.close(log)
    faulthandler.enable(all_threads=True)
    torch.set_num_threads(1)
    os.environ["LOCAL_RANK"] = str(rank)
    dist.init_process_group("neuron", init_method=init_method, rank=rank, world_size=world,
                            timeout=pg_timeout)
    torch.neuron.set_device(rank)
    try:
        fn(rank, world, *args)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def run_ranks(fn, world: int, *args, init: str = "tcp", pg_timeout: timedelta = PG_TIMEOUT,
              deadline_s: float = DEADLINE_S) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        if init == "tcp":
            init_method = f"tcp://127.0.0.1:{free_port()}"
        elif init == "file":
            init_method = f"file://{os.path.join(tmp, 'rendezvous')}"
        else:
            raise ValueError(init)
        ctx = mp.start_processes(_entry, args=(world, init_method, fn, args, pg_timeout, tmp),
                                 nprocs=world, join=False, start_method="spawn")
        end = time.monotonic() + deadline_s
        try:
            while not ctx.join(timeout=1):
                if time.monotonic() > end:
                    raise TimeoutError(f"ranks still running after {deadline_s:.0f} s")
        except mp.ProcessExitedException as e:
            raise RuntimeError(f"rank {e.error_index} died (exit code {e.exit_code}, signal {e.signal_name}); "
                               f"its stderr ends with:\n{_tail(_rank_log(tmp, e.error_index))}") from e
        finally:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
                    p.join(5)
            for rank in range(world):  # pass the ranks' warnings on to the test's own stderr
                if os.path.exists(_rank_log(tmp, rank)):
                    with open(_rank_log(tmp, rank), errors="replace") as f:
                        sys.stderr.write(f.read())


def _tail(path: str, lines: int = 40) -> str:
    if not os.path.exists(path):
        return "(no stderr file)"
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-lines:]) or "(empty)"


def run_torchrun(script: str, *, nproc: int, nnodes: int = 1, env: dict | None = None,
                 timeout: float = 180) -> list[subprocess.CompletedProcess]:
    """Launch `script` with torchrun, one agent per node (all on localhost, c10d
    rendezvous); returns each agent's completed process."""
    port = free_port()
    full_env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(
        [HERE, REPO, os.environ.get("PYTHONPATH", "")]))
    full_env.update(env or {})
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nnodes}",
           f"--nproc-per-node={nproc}", "--rdzv-backend=c10d",
           f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=neuron-test",
           "--max-restarts=0", "--monitor-interval=0.5"]
    procs = []
    for node in range(nnodes):
        node_cmd = cmd + ([f"--node-rank={node}"] if nnodes > 1 else []) + [script]
        procs.append(subprocess.Popen(node_cmd, env=full_env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    results = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        results.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return results
