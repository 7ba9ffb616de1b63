"""`python -m torch_neuronx.numerics.sweep`, as a user runs it: the child gets the compatibility sweep's tiny
models through the runner registered at startup, and the table shows what the architecture hits."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_sweep_command_runs_a_tiny_model_in_check_mode(tmp_path):
    out = tmp_path / "rows.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "torch_neuronx.numerics.sweep", "--archs", "gpt2", "--json", str(out)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (row,) = json.loads(out.read_text())
    assert row["arch"] == "gpt2" and row["error"] is None
    assert sum(row["exposure"]["int64"].values()) > 0     # position ids and the generate loop run in int64
    table_row = next(line for line in proc.stdout.splitlines() if line.startswith("| gpt2 |"))
    assert "did not run" not in table_row and table_row.split("|")[2].strip() != "-"
