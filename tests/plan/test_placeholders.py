"""Placeholder values keep the usual loops going, and every host read is listed by source line."""
from __future__ import annotations

import pytest
import torch

from torch_neuronx import plan


@pytest.fixture
def small_threshold(monkeypatch):
    # a tiny model's weights count as large, so its ops compute only shapes, as a full-size one's do
    monkeypatch.setenv("TORCH_NEURONX_DRY_RUN_LARGE_BYTES", "4096")


def test_generate_runs_its_new_tokens_and_lists_the_item_sites(small_threshold):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    cfg = Qwen3Config(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                      max_position_embeddings=64, bos_token_id=1, eos_token_id=3, pad_token_id=3)
    with plan.dry_run() as run:
        assert plan.is_active()
        model = Qwen3ForCausalLM(cfg).to("neuron")
        ids = torch.tensor([[5, 6, 7, 8]], device="neuron")
        out = model.generate(ids, max_new_tokens=5, do_sample=False)
        loss = model(ids, labels=ids).loss
        value = loss.item(); here = f"{__file__}:{_line()}"  # noqa: E702 - one line: the site
    assert not plan.is_active()
    assert out.shape == (1, 9)
    assert out[0, 4:].tolist() == [0] * 5            # argmax of zero logits
    assert value == 0.0                               # a loss computed from phantom logits reads 0.0
    sites = {s["site"]: s for s in run.report()["host_syncs"]}
    assert here in sites and sites[here]["count"] == 1 and sites[here]["kind"] == "item"
    assert any("generation" in s for s in sites)      # generate()'s own reads (stopping criteria)
    # phantom weights were never filled: the ops on them computed only shapes
    assert run.ops["aten::mm"] > 0


def _line() -> int:
    import sys

    return sys._getframe(1).f_lineno


def test_small_ops_run_for_real_and_large_ones_read_as_zeros():
    with plan.dry_run() as run:
        small = torch.arange(6.0, device="neuron")
        big = torch.ones(512, 1024, device="neuron")          # 2 MiB: never filled
        assert small.sum().item() == 15.0                     # real values stay real
        assert big.sum().item() == 0.0                        # depends on a phantom tensor: zero
        assert big[3, 4].item() == 0.0
        assert bool((big @ big.T).shape == (512, 512))
    kinds = {(s["kind"], s["count"]) for s in run.report()["host_syncs"]}
    assert ("item", 1) in kinds


def test_indexing_a_large_tensor_by_integer_positions_is_shape_only():
    """aten::index carries the dynamic-output-shape tag for boolean masks; integer indices have a
    static result shape (diffusers' rotary `freqs[frame_index]`), so a dry run computes it."""
    with plan.dry_run():
        table = torch.ones(2048, 1024, device="neuron")          # 8 MiB: phantom, shape-only
        rows = table[torch.tensor([0, 5, 7, 5], device="neuron")]
        assert rows.shape == (4, 1024) and rows.device.type == "neuron"
        with pytest.raises(plan.DryRunError, match="aten::index.*depends on tensor values"):
            table[table[:, 0] > 0]                                # a mask of phantom values: unknowable
