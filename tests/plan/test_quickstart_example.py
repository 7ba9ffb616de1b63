"""examples/quickstart.py, README's first command, prints its three parts: training on neuron equal to CPU,
the estimated trn2 step time next to the host's, and a full-size Qwen3-8B training plan on a trn2.48xlarge
(fits, HBM per core, step time). The plan part is the planner's real dry run (about 40 CPU s)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_quickstart_prints_its_three_parts():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "quickstart.py")], cwd=ROOT,
                       capture_output=True, text=True, timeout=900)
    out = r.stdout
    assert r.returncode == 0, (out + r.stderr)[-4000:]
    assert "== 1. train on neuron" in out and "neuron equals CPU bit for bit" in out, out
    assert len(re.findall(r"step \d: neuron loss (\S+)  cpu loss \1\n", out)) == 6, out
    assert "== 2. estimated trn2 time per step" in out, out
    estimated = re.search(r"estimated on trn2 \(one logical NeuronCore, eager\): +([\d.]+) ms", out)
    measured = re.search(r"measured on this host \(virtual NeuronCore\): +([\d.]+) ms", out)
    assert estimated and measured and float(estimated.group(1)) > 0 and float(measured.group(1)) > 0, out
    assert "== 3. plan Qwen3-8B training at full size on a trn2.48xlarge" in out, out
    assert "8.19 B parameters; layout trn2.48xlarge LNC=2" in out, out
    assert re.search(r"fits: yes; peak HBM per core \d+\.\d\d GiB of 24 GiB", out), out
    assert re.search(r"estimated step time on trn2: \d+\.\d\d s, [\d,]+ tokens/s, MFU \d+%", out), out
    assert re.search(r"80% range of the step time: \d+\.\d\d to \d+\.\d\d s \(dense/train/nxd-training: \d+ "
                     r"published rows", out), out
    assert out.rstrip().endswith("quickstart OK"), out
