"""examples/plan_trace_picture.py reads a dry run's real Chrome trace; its per-kind seconds add up to the estimate."""
from __future__ import annotations

import importlib.util
import os

import pytest
import torch

from torch_neuronx import plan

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_picture_of_a_dry_run_trace(tmp_path):
    with plan.dry_run() as run:
        x = torch.ones(256, 256, device="neuron")
        (x @ x).relu().sum()
    trace = str(tmp_path / "trace.json")
    run.write_trace(trace)
    spec = importlib.util.spec_from_file_location("plan_trace_picture",
                                                  os.path.join(REPO, "examples", "plan_trace_picture.py"))
    picture = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(picture)
    core, rows, seconds = picture.timeline(trace)   # what draw() plots (matplotlib is not a test dependency)
    assert core == "neuron:0 (estimated)" and "matmul" in rows and len(rows["matmul"]) == 1
    assert sum(seconds.values()) == pytest.approx(run.estimate.total_s, rel=1e-6)
