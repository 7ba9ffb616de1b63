"""A dry run's report times each generate(): TTFT, time per output token and tokens/s, per call."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch

from torch_neuronx import plan

CONFIG = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
              num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=64,
              bos_token_id=1, eos_token_id=None, pad_token_id=0)


@pytest.fixture
def small_threshold(monkeypatch):
    # a tiny model's weights count as large, so its ops compute only shapes, as a full-size one's do
    monkeypatch.setenv("TORCH_NEURONX_DRY_RUN_LARGE_BYTES", "4096")


def test_chunked_prefill_then_decode_steps_are_timed_apart(small_threshold):
    from transformers import GenerationMixin, Qwen3Config, Qwen3ForCausalLM

    original = GenerationMixin.generate
    with plan.dry_run() as run:
        model = Qwen3ForCausalLM(Qwen3Config(**CONFIG)).to("neuron")
        ids = torch.ones(2, 4, dtype=torch.long, device="neuron")
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=4, min_new_tokens=4,
                             do_sample=False, cache_implementation="static", prefill_chunk_size=2)
    assert out.shape == (2, 8)
    # observe only: generate and the model's own method are back once the dry run ends
    assert GenerationMixin.generate is original
    assert "prepare_inputs_for_generation" not in model.__dict__
    report = run.report()
    (call,) = report["generate_calls"]
    assert call["site"] == f"{__file__}:{_line_of('out = model.generate(')}"
    assert (call["batch"], call["input_tokens"], call["new_tokens"]) == (2, 4, 4)
    # two prefill chunks of 2 tokens, then a forward per new token after the first
    assert (call["prefill_forwards"], call["forward_calls"]) == (2, 5)
    # the phases add up to the call, and the two-forward prefill costs more than one decode step
    assert call["ttft_ms"] + 3 * call["tpot_ms"] == pytest.approx(call["seconds"] * 1e3, rel=1e-9)
    assert call["ttft_ms"] > 1.5 * call["tpot_ms"] > 0
    assert call["output_tokens_per_s"] == pytest.approx(2 * 4 / call["seconds"])
    assert call["seconds"] <= report["estimated_total_s"]   # model building and .to() are outside it
    assert "## generate() calls: 1" in run.markdown()


def test_plan_run_of_a_script_that_imports_transformers_itself(tmp_path):
    script = tmp_path / "gen.py"
    script.write_text(textwrap.dedent(f"""
        import torch
        from transformers import Qwen3Config, Qwen3ForCausalLM
        model = Qwen3ForCausalLM(Qwen3Config(**{CONFIG!r})).to("neuron")
        ids = torch.ones(1, 3, dtype=torch.long, device="neuron")
        for _ in range(2):
            model.generate(ids, max_new_tokens=3, min_new_tokens=3, do_sample=False)
    """))
    report = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "run", "--json", str(report), "--",
                           str(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    calls = json.loads(report.read_text())["generate_calls"]
    assert [(c["site"].endswith("gen.py:7"), c["new_tokens"], c["forward_calls"]) for c in calls] == \
        [(True, 3, 3), (True, 3, 3)]
    assert "## generate() calls: 2" in proc.stdout


def _line_of(text: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if line.strip().startswith(text))
