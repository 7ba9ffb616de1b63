"""The sweep command end to end on two architectures, and its hung/crashed worker handling."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from torch_neuronx.compat import report

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _sweep(tmp_path, *args, env=None):
    out = tmp_path / "report"
    r = subprocess.run([sys.executable, "-m", "torch_neuronx.compat", "--out", str(out), *args],
                       cwd=ROOT, capture_output=True, text=True, timeout=600, env=dict(os.environ, **(env or {})))
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    data = json.loads((tmp_path / "report.json").read_text())
    return data, (tmp_path / "report.md").read_text(), r.stdout


def test_sweep_reports_pass_with_logit_and_token_agreement(tmp_path):
    data, md, _ = _sweep(tmp_path, "--archs", "llama", "--workers", "1")
    s = data["summary"]
    assert s["architectures"] == 1 and s["cpu_passing"] == 1
    assert s["eager_pass_rate"] == 1.0 and s["static_compiled_pass_rate"] == 1.0, data["results"]
    for r in data["results"]:
        assert r["neuron"]["logit_max_diff"] == 0.0  # eager neuron runs the CPU kernels
        assert r["neuron"]["graphs_compiled"] >= 1
    assert "| llama |" in md and "**100.0%**" in md


def test_hung_and_crashed_workers_are_recorded_and_replaced(tmp_path):
    # llama: the worker dies; gpt2: a 0.5 s budget is too short for anything, so the worker is killed
    data, _, stdout = _sweep(tmp_path, "--archs", "llama,gpt2", "--workers", "1", "--timeout", "0.5",
                             "--no-compile", env={"TORCH_NEURONX_COMPAT_TEST_CRASH": "llama"})
    by_arch = {r["arch"]: r for r in data["results"]}
    assert by_arch["llama"]["error_class"] == "WorkerCrash"
    assert by_arch["gpt2"]["error_class"] == "Timeout" and "killed and replaced" in by_arch["gpt2"]["error"]
    s = data["summary"]
    assert (s["workers_started"], s["crashes"], s["timeouts"]) == (2, 1, 1)
    assert s["cpu_passing"] == 0  # neither reached its CPU stages: not counted


def test_cpu_failures_are_not_counted():
    results = [
        {"arch": "a", "cpu": {"forward": "pass", "generate": "pass", "static": "pass"},
         "neuron": {"eager": "pass", "static": "pass"}},
        {"arch": "b", "stage": "cpu_forward", "error_class": "IndexError", "cpu": {}, "neuron": {}},
        {"arch": "c", "cpu": {"forward": "pass", "generate": "pass", "static": "fail"},
         "neuron": {"eager": "mismatch"}},
        {"arch": "d", "stage": "neuron_static", "error_class": "Timeout", "cpu": {}, "neuron": {}},
    ]
    s = report.summarize(results, {})
    assert (s["cpu_passing"], s["eager_pass"], s["cpu_static_passing"], s["static_compiled_pass"]) == (3, 1, 2, 1)


def test_no_compile_runs_no_static_stage_and_reports_it_skipped(monkeypatch):
    # --no-compile used to leave the neuron static stage empty, which the progress line printed as FAIL
    from torch_neuronx.compat import worker

    monkeypatch.setattr(worker, "_out", os.open(os.devnull, os.O_WRONLY))  # the stage beacons the sweep reads
    r = worker.run_one("llama", compile_static=False)
    assert r["cpu"]["static"] == r["neuron"]["static"] == "skipped", r
    assert "cpu_static" not in r["stage_seconds"] and "neuron_static" not in r["stage_seconds"]
    c = report.classify(r)
    assert c["eager_ok"] and c["static_skipped"] and not c["cpu_static_ok"]
    s = report.summarize([r], {})
    assert s["eager_pass_rate"] == 1.0 and s["static_compiled_pass_rate"] is None
