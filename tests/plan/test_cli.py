"""`python -m torch_neuronx.plan run -- script.py`: phantom memory, the report, the trace."""
from __future__ import annotations

import json
import os
import subprocess
import sys


def test_plan_run_of_a_40_gb_model_reports_the_oom_with_little_host_memory(tmp_path):
    script = os.path.join(os.path.dirname(__file__), "big_stack.py")
    report, trace, rss = tmp_path / "r.json", tmp_path / "t.json", tmp_path / "rss.json"
    proc = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "run", "--instance", "trn2.48xlarge",
                           "--lnc", "2", "--json", str(report), "--trace", str(trace), "--", script, str(rss)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "# Dry run on trn2.48xlarge (LNC=2): does NOT fit" in proc.stdout
    r = json.loads(report.read_text())
    assert r["dry_run"] is True and r["fits"] is False
    assert r["oom"]["message"].startswith("Neuron out of memory. Tried to allocate 128.00 MiB")
    assert r["oom"]["site"].endswith("big_stack.py:14")
    cap = r["hbm_capacity_bytes_per_core"]
    assert cap == 24 * 2**30                                   # trn2 at LNC=2: 24 GiB per logical core
    assert cap - 128 * 2**20 < r["peak_hbm_bytes_per_core"] <= cap
    assert r["cores"][0]["breakdown"]["parameters"] > 0.95 * r["peak_hbm_bytes_per_core"]
    used = json.loads(rss.read_text())
    assert used["layers"] == cap // (128 * 2**20)              # every layer that fits was made
    assert (used["peak_kib"] - used["base_kib"]) * 1024 < 1 << 30   # 24 GiB planned in < 1 GiB of host
    assert json.loads(trace.read_text())["traceEvents"] is not None
