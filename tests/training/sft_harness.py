"""Run examples/sft_neuron_example.py as a user would (one process or torchrun) and read its summary.

Every run is a fresh interpreter in its own process group with a deadline: on timeout the whole group
(torchrun and its ranks) is killed, so a hung rank fails the test instead of the suite.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from tests.clients.harness import finish as _finish  # waits to a deadline, then kills the group

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(REPO, "examples", "sft_neuron_example.py")
sys.path.insert(0, os.path.join(REPO, "examples"))

# The seed's flags, scaled down: 4 sequences x 128 tokens per optimizer step, 4 steps.
SEED_FLAGS = ("--packing", "true", "--packing_strategy", "wrapped", "--save_only_model", "true",
              "--max_length", "128", "--per_device_train_batch_size", "2", "--max_steps", "4",
              "--warmup_steps", "0.03", "--learning_rate", "1e-3", "--seed", "42", "--logging_steps", "1",
              "--report_to", "none", "--dataloader_num_workers", "0")
GLOBAL_SEQUENCES = 4
RUN_TIMEOUT_S = 240


def _env(extra: dict | None) -> dict:
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1", PYTHONPATH=REPO)
    env.update(extra or {})
    return env


def _start(cmd: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def run(cmd: list[str], env: dict, timeout: float = RUN_TIMEOUT_S) -> subprocess.CompletedProcess:
    return _finish(_start(cmd, env), timeout)


def run_all(launches: list[tuple[list[str], dict]], timeout: float = RUN_TIMEOUT_S) -> list:
    """Start every (cmd, env) at once and wait for all. One process leaves a core of CI's two idle in its
    imports and single-threaded steps (OMP_NUM_THREADS=1), so two side by side take little longer than one."""
    procs = [_start(cmd, env) for cmd, env in launches]
    try:
        return [_finish(proc, timeout) for proc in procs]
    finally:  # one run past its deadline: end the others too instead of leaving them to the suite
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()


def _command(assets: str, out_dir: str, *flags: str, nproc: int = 1, tp: int | None = None,
             fsdp: int | None = None, env: dict | None = None) -> tuple[list[str], dict]:
    extra = dict(env or {})
    if tp is not None:
        extra["TP_SIZE"] = str(tp)
    if fsdp is not None:
        extra["FSDP_SIZE"] = str(fsdp)
    if nproc == 1:
        launcher = [sys.executable, SCRIPT]
    else:
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
                    SCRIPT]
        dp = nproc // (tp or 1)
        if "--gradient_accumulation_steps" not in flags and dp and GLOBAL_SEQUENCES % (2 * dp) == 0:
            flags = (*flags, "--gradient_accumulation_steps", str(GLOBAL_SEQUENCES // (2 * dp)))
    if "--gradient_accumulation_steps" not in flags:
        flags = (*flags, "--gradient_accumulation_steps", str(GLOBAL_SEQUENCES // 2))
    return [*launcher, "--tiny_local_assets", assets, "--output_dir", out_dir, *SEED_FLAGS, *flags], _env(extra)


def _result(out_dir: str, proc: subprocess.CompletedProcess, check: bool):
    if check:
        assert proc.returncode == 0, proc.stdout[-8000:]
    path = os.path.join(out_dir, "sft_summary.json")
    summary = json.load(open(path)) if os.path.exists(path) else None
    return summary, proc


def sft(assets: str, out_dir: str, *flags: str, check: bool = True, timeout: float = RUN_TIMEOUT_S, **launch):
    """Run the example; returns (summary dict or None, CompletedProcess). `launch`: nproc, tp, fsdp, env."""
    return _result(out_dir, run(*_command(assets, out_dir, *flags, **launch), timeout), check)


def sft_all(assets: str, runs: dict, check: bool = True, timeout: float = RUN_TIMEOUT_S) -> dict:
    """Several runs of the example at once (run_all): {name: (out_dir, flags, launch kwargs)} ->
    {name: (summary, proc)}."""
    finished = run_all([_command(assets, out_dir, *flags, **launch) for out_dir, flags, launch in runs.values()],
                       timeout)
    return {name: _result(runs[name][0], proc, check) for name, proc in zip(runs, finished)}


def max_diff(a: list[float], b: list[float]) -> float:
    assert len(a) == len(b), (a, b)
    return max(abs(x - y) for x, y in zip(a, b))
