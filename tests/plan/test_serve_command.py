"""`python -m torch_neuronx.plan serve` in the main environment: vLLM is not there, so the command says how
to get vLLM's environment; flags that cannot work stop before anything loads, naming the flag. The
plans themselves run in vLLM's environment (tests/vllm/test_plan_serve.py)."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = {"model_type": "llama", "vocab_size": 1000, "hidden_size": 128, "intermediate_size": 256,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}


def _serve(tmp_path, *args):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY))
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "serve", "--config", str(config), *args, "-q"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here: the plan runs")
def test_without_vllm_it_says_how_to_get_vllms_environment(tmp_path):
    done = _serve(tmp_path, "--instance", "trn2.3xlarge", "--tp", "2")
    assert done.returncode == 2
    assert "vLLM is not installed" in done.stderr
    assert 'pip install -e ".[vllm]"' in done.stderr and "docs/serving.md" in done.stderr


@pytest.mark.parametrize("args, named", [
    (["--instance", "trn2.3xlarge", "--tp", "8"], "does not divide the 4 NeuronCores"),
    (["--max-num-seqs", "0"], "--max-num-seqs must be a positive integer"),
    (["--gpu-memory-utilization", "1.5"], "--gpu-memory-utilization is a share"),
    (["--request-rate", "0"], "--request-rate must be > 0"),
    (["--input-tokens", "-3"], "--input-tokens must be a positive integer"),
])
def test_flags_that_cannot_work_stop_naming_the_flag(tmp_path, args, named):
    done = _serve(tmp_path, *args)
    assert done.returncode == 2 and named in done.stderr, done.stderr
