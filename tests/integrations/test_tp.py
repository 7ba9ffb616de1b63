"""The TP generation example under torchrun; greedy tokens equal single-process CPU's.

Two ranks only: each rank holds a shard of every projection and the decode step's all-reduces run over the
neuron process group exactly as with four (the tiny model's 8 heads divide 2, 4 and 8 alike), and a 4-rank
launch on CI's 2 cores cost ~90 s for no other code path."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("nproc", [2])
def test_tp_generation_example_matches_cpu(nproc, tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", TORCHINDUCTOR_COMPILE_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           os.path.join(ROOT, "examples", "hf_tp_generate.py"), "--tiny", "--check", "--max-new-tokens", "4",
           "--tiny-dir", str(tmp_path / "tiny")]
    r = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert f"[{nproc} ranks]" in r.stdout
    assert "greedy tokens equal single-process CPU: True" in r.stdout, out[-4000:]
