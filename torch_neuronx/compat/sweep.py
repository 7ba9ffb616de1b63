"""A pool of long-lived worker processes (worker.py), one architecture at a time each, with a
per-architecture timeout. A worker that hangs is killed and replaced; one that crashes is replaced; both
are recorded with the stage they were in. Workers are also recycled every `recycle` architectures to
bound memory growth.
"""
from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time

from .worker import RESULT_PREFIX, STAGE_PREFIX

STARTUP_TIMEOUT = 240.0


class _Worker:
    def __init__(self, env: dict, log_path: str):
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "torch_neuronx.compat.worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, env=env, bufsize=0)
        self.lines: queue.Queue = queue.Queue()
        self.stage = "startup"
        self.done = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.proc.stdout:
            self.lines.put(raw.decode(errors="replace").rstrip("\n"))
        self.lines.put(None)  # EOF: the process ended

    def wait_for(self, prefix: str, deadline: float):
        """The payload of the next line with `prefix`; ("timeout"|"crash", None) otherwise."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout", None
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                return "timeout", None
            if line is None:
                return "crash", None
            if line.startswith(STAGE_PREFIX):
                self.stage = line[len(STAGE_PREFIX):]
                if prefix == STAGE_PREFIX:
                    return "ok", self.stage
            elif line.startswith(RESULT_PREFIX) and prefix == RESULT_PREFIX:
                return "ok", json.loads(line[len(RESULT_PREFIX):])

    def submit(self, task: dict) -> None:
        self.proc.stdin.write((json.dumps(task) + "\n").encode())
        self.proc.stdin.flush()

    def stop(self, kill: bool = False) -> None:
        try:
            if kill:
                self.proc.kill()
            else:
                self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def _worker_env(cache_dir: str | None, threads: int) -> dict:
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(threads))
    env["TORCH_NEURONX_COMPAT_THREADS"] = str(threads)
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    if cache_dir:
        env["TORCH_NEURONX_NEFF_CACHE_DIR"] = cache_dir
    return env


def _share_vec_isa_probe(env: dict) -> None:
    """Probe Inductor's C++ vector ISAs once here instead of in every worker.

    Each fresh process that compiles for neuron (Inductor's C++ codegen) first builds and dlopens a test
    program per ISA the CPU advertises: ~20-45 s of a loaded core per worker start. The probe runs in a
    thread of the sweep (in parallel with the first workers); if the compiler builds every advertised ISA,
    workers started afterwards get TORCHINDUCTOR_VEC_ISA_OK=1 and pick exactly the ISA they would have
    probed. If any advertised ISA fails, nothing changes and workers keep probing for themselves.
    """
    if "TORCHINDUCTOR_VEC_ISA_OK" in env:
        return
    try:
        from ..compiler import vec_isa_ok

        if vec_isa_ok():
            env["TORCHINDUCTOR_VEC_ISA_OK"] = "1"
    except Exception:  # noqa: BLE001 - an optimisation only: workers probe themselves
        pass


def run_sweep(archs: list[str], workers: int = 2, timeout: float = 300.0, compile_static: bool = True,
              cache_dir: str | None = None, log_dir: str = ".", recycle: int = 50, threads: int = 1,
              progress=None) -> tuple[list[dict], dict]:
    """Run every architecture; returns (results in input order, run statistics)."""
    tasks: queue.Queue = queue.Queue()
    for i, arch in enumerate(archs):
        tasks.put((i, arch))
    results: list[dict | None] = [None] * len(archs)
    stats = {"workers_started": 0, "timeouts": 0, "crashes": 0}
    lock = threading.Lock()
    env = _worker_env(cache_dir, threads)
    os.makedirs(log_dir, exist_ok=True)
    threading.Thread(target=_share_vec_isa_probe, args=(env,), daemon=True).start()

    def slot(k: int):
        worker = None
        while True:
            try:
                i, arch = tasks.get_nowait()
            except queue.Empty:
                break
            if worker is None or worker.done >= recycle:
                if worker is not None:
                    worker.stop()
                worker = _Worker(dict(env), os.path.join(log_dir, f"worker{k}.log"))
                with lock:
                    stats["workers_started"] += 1
                status, _ = worker.wait_for(STAGE_PREFIX, time.monotonic() + STARTUP_TIMEOUT)
                if status != "ok":
                    worker.stop(kill=True)
                    worker = None
                    results[i] = {"arch": arch, "stage": "worker_startup", "error_class": f"Worker{status.title()}",
                                  "error": f"worker did not start ({status})", "cpu": {}, "neuron": {}}
                    continue
            start = time.monotonic()
            worker.submit({"arch": arch, "compile": compile_static})
            worker.stage = "queued"
            status, result = worker.wait_for(RESULT_PREFIX, start + timeout)
            if status == "ok":
                worker.done += 1
                results[i] = result
            else:
                stage = worker.stage
                worker.stop(kill=True)
                code = worker.proc.returncode
                worker = None
                with lock:
                    stats["timeouts" if status == "timeout" else "crashes"] += 1
                what = (f"no result within {timeout:.0f} s (worker killed and replaced)" if status == "timeout"
                        else f"worker process died (exit code {code}) and was replaced")
                results[i] = {"arch": arch, "stage": stage, "error_class": "Timeout" if status == "timeout"
                              else "WorkerCrash", "error": what, "cpu": {}, "neuron": {},
                              "seconds": round(time.monotonic() - start, 1)}
            if progress is not None:
                progress(results[i])
        if worker is not None:
            worker.stop()

    t0 = time.monotonic()
    threads_ = [threading.Thread(target=slot, args=(k,), daemon=True) for k in range(max(1, workers))]
    for t in threads_:
        t.start()
    for t in threads_:
        t.join()
    stats["wall_seconds"] = round(time.monotonic() - t0, 1)
    stats["workers"] = workers
    stats["timeout_s"] = timeout
    return [r for r in results if r is not None], stats
