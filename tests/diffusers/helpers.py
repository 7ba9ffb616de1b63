"""Launch examples/qwen_image_tp.py under torchrun and read rank 0's JSON line."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(REPO, "examples", "qwen_image_tp.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_example(nproc: int, *args: str, timeout: float = 240) -> tuple[dict | None, subprocess.CompletedProcess]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", "--rdzv-backend=c10d",
           f"--rdzv-endpoint=127.0.0.1:{_free_port()}", "--max-restarts=0", "--monitor-interval=0.5",
           EXAMPLE, "--tiny", *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    result = None
    for line in proc.stdout.splitlines():
        if line.startswith("{") and '"world_size"' in line:
            result = json.loads(line)
    return result, proc
