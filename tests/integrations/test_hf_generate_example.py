"""examples/hf_generate.py as docs/hf-inference.md runs it (`--tiny --check`, offline): both generation modes
(dynamic cache eager, static cache with the decode step compiled) give CPU's greedy tokens."""
from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_hf_generate_example_tiny_check():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "hf_generate.py"), "--tiny", "--check",
                        "--max-new-tokens", "4"], cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"))
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    assert " on neuron:0 (torch.float32)" in r.stdout, r.stdout
    for mode in ("dynamic cache, eager", "static cache, decode compiled"):
        assert f"{mode}: greedy tokens equal CPU: True" in r.stdout, r.stdout
