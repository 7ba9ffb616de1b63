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


def run(cmd: list[str], env: dict, timeout: float = RUN_TIMEOUT_S) -> subprocess.CompletedProcess:
    proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"{' '.join(cmd[:6])}... did not finish in {timeout}s:\n{out[-6000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, "")


def sft(assets: str, out_dir: str, *flags: str, nproc: int = 1, tp: int | None = None, fsdp: int | None = None,
        env: dict | None = None, check: bool = True, timeout: float = RUN_TIMEOUT_S):
    """Run the example; returns (summary dict or None, CompletedProcess)."""
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
    cmd = [*launcher, "--tiny_local_assets", assets, "--output_dir", out_dir, *SEED_FLAGS, *flags]
    proc = run(cmd, _env(extra), timeout)
    if check:
        assert proc.returncode == 0, proc.stdout[-8000:]
    path = os.path.join(out_dir, "sft_summary.json")
    summary = json.load(open(path)) if os.path.exists(path) else None
    return summary, proc


def max_diff(a: list[float], b: list[float]) -> float:
    assert len(a) == len(b), (a, b)
    return max(abs(x - y) for x, y in zip(a, b))
