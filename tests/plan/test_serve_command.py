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


def test_dataset_rows_become_requests_and_a_bad_row_names_its_line(tmp_path):
    from torch_neuronx.plan.serve._workload import RequestSpec, WorkloadError, from_dataset

    good = tmp_path / "good.jsonl"
    good.write_text('{"input_tokens": 100, "output_tokens": 20}\n\n{"input_tokens": 7, "output_tokens": 3}\n')
    assert from_dataset(str(good)) == [RequestSpec(100, 20), RequestSpec(7, 3)]
    assert from_dataset(str(good), 1) == [RequestSpec(100, 20)]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input_tokens": 100, "output_tokens": 20}\n\n{"prompt": "hi"}\n')
    with pytest.raises(WorkloadError, match=r"--dataset .*bad.jsonl' line 3: expected a JSON object"):
        from_dataset(str(bad))
    with pytest.raises(WorkloadError, match="cannot be read"):
        from_dataset(str(tmp_path / "missing.jsonl"))
