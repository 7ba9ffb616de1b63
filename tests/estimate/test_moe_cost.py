"""The routed experts' cost as NxD Inference runs them (estimate/moe.py), pinned to counts by hand.

A small layer: hidden 256, the rank's intermediate 128, 8 experts, top 2, bf16 (one expert's gate,
up and down weights: 3 x 256 x 128 x 2 B = 196,608 B; one row through one expert: 2 x 3 x 256 x 128
= 196,608 FLOPs). A 1,024-token prompt routes 2,048 (token, expert) pairs; blocks of 512 tokens.
"""
from __future__ import annotations

import math

import pytest

from torch_neuronx.estimate import hardware
from torch_neuronx.estimate.moe import ExpertShape, algorithm, block_count, blocks_with_tokens, moe_cost

SHAPE = ExpertShape(hidden=256, intermediate=128, local_experts=8, experts=8, top_k=2)
W = 3 * 256 * 128 * 2            # bytes of one expert's weights
F = 2 * 3 * 256 * 128            # FLOPs of one row through one expert
ROW = 256 * 2                    # bytes of one token row
T = 1024
BALANCED = [256] * 8
# a recorded skew: the busiest expert takes 4x its balanced share (every token), the tail little
SKEWED = [1024, 512, 256, 128, 64, 32, 16, 16]


def _hw(**assumptions):
    return hardware("trn2.3xlarge", 1, assumptions=assumptions or None)


def test_block_count_is_the_worst_case_nxd_provisions():
    # N = ceil((T x top_k - (E - 1)) / B) + E - 1 = ceil(2041 / 512) + 7 = 4 + 7
    assert block_count(T, 2, 8, 512) == 11
    # the NxD Inference guide's example: 1,000 tokens, 8 experts, top 2, blocks of 256 -> 15
    assert block_count(1000, 2, 8, 256) == 15
    # never more blocks than (token, expert) pairs
    assert block_count(2, 2, 8, 512) == 4
    assert blocks_with_tokens(BALANCED, 512) == 8
    assert blocks_with_tokens(SKEWED, 512) == 2 + 7


@pytest.mark.parametrize("loads", [BALANCED, SKEWED], ids=["balanced", "skewed"])
def test_blockwise_loops_over_every_provisioned_block(loads):
    """Default kernel (no DMA skipping, no early exit): all 11 blocks run 512 rows each and load
    their expert's weights, whatever the routing."""
    hw = _hw()
    c = moe_cost(T, T, loads, SHAPE, hw)
    assert c.algorithm == "blockwise"
    assert (c.blocks, c.blocks_run, c.block_size) == (11, 11, 512)
    assert c.blocks_with_tokens == blocks_with_tokens(loads, 512)
    assert c.flops == 11 * 512 * F
    assert c.weight_bytes == 11 * W and c.expert_loads == 11
    assert c.token_bytes == 3 * 11 * 512 * ROW          # rows read, outputs accumulated (read + write)
    peak = hw.tensor_flops("bfloat16") * hw.assumptions.matmul_efficiency
    bw = hw.hbm_bytes_per_s * hw.assumptions.hbm_efficiency
    assert c.seconds == pytest.approx(max(c.flops / peak, (c.weight_bytes + c.token_bytes) / bw), rel=1e-12)
    # padding: 11 x 512 slots for 2,048 routed rows
    assert c.flops / (T * 2 * F) == pytest.approx(11 * 512 / 2048)


def test_skipping_changes_what_the_sources_say_it_changes():
    """Early exit runs only blocks with tokens (8 balanced, 9 skewed); weight skipping loads each
    expert with tokens once; token skipping moves only the routed rows."""
    hw = _hw(moe_skip_padded_blocks=1, moe_skip_dma_weight=1, moe_skip_dma_token=1)
    bal, skew = moe_cost(T, T, BALANCED, SHAPE, hw), moe_cost(T, T, SKEWED, SHAPE, hw)
    assert (bal.blocks_run, skew.blocks_run) == (8, 9)
    assert (bal.flops, skew.flops) == (8 * 512 * F, 9 * 512 * F)
    assert bal.weight_bytes == skew.weight_bytes == 8 * W
    assert bal.token_bytes == skew.token_bytes == 3 * 2048 * ROW
    # a skew leaves experts without tokens: they load nothing
    sparse = [2048 // 2, 2048 // 2] + [0] * 6
    assert moe_cost(T, T, sparse, SHAPE, hw).weight_bytes == 2 * W


def test_block_size_is_an_overridable_assumption():
    c = moe_cost(T, T, BALANCED, SHAPE, _hw(moe_block_size=256))
    assert (c.blocks, c.block_size) == (math.ceil((2048 - 7) / 256) + 7, 256) == (15, 256)
    assert c.weight_bytes == 15 * W


def test_token_generation_selective_or_all_experts_as_nxd_chooses():
    hw = _hw()
    # batch 1 decode: 1 x 2 / 8 < 1 -> selective loading: 2 expert loads, 2 rows
    one = moe_cost(1, 1, [1, 1, 0, 0, 0, 0, 0, 0], SHAPE, hw)
    assert (one.algorithm, one.expert_loads, one.weight_bytes, one.flops) == ("selective", 2, 2 * W, 2 * F)
    # batch 4: 4 x 2 / 8 = 1 -> all experts: each of the 8 loads once and runs all 4 tokens
    four = moe_cost(4, 1, [1] * 8, SHAPE, hw)
    assert (four.algorithm, four.expert_loads, four.weight_bytes, four.flops) == ("all_experts", 8, 8 * W, 4 * 8 * F)
    # the threshold is an assumption: at 2.0, batch 4 still loads selectively (8 loads, one per pair)
    assert moe_cost(4, 1, [1] * 8, SHAPE, _hw(moe_selective_loading_threshold=2.0)).algorithm == "selective"
    # expert parallelism: NxD has no selective loading there; all local experts run
    ep = ExpertShape(hidden=256, intermediate=128, local_experts=2, experts=8, top_k=2)
    assert algorithm(1, 1, ep, hw) == "all_experts"


def test_short_prompts_skip_the_blockwise_kernel():
    hw = _hw()
    assert algorithm(3, 3, SHAPE, hw) == "selective"       # 3 x 2 / 8 < 1
    assert algorithm(100, 100, SHAPE, hw) == "all_experts"  # 200 pairs < one block of 512
    assert algorithm(256, 256, SHAPE, hw) == "blockwise"    # 512 pairs


def test_bad_input_names_what_to_fix():
    hw = _hw()
    with pytest.raises(ValueError, match="8 local experts"):
        moe_cost(T, T, [1] * 7, SHAPE, hw)
    with pytest.raises(ValueError, match="exceed tokens x top_k"):
        moe_cost(T, T, [1024] * 8, SHAPE, hw)
    with pytest.raises(ValueError, match="tokens=0"):
        moe_cost(0, 1, [0] * 8, SHAPE, hw)
    with pytest.raises(ValueError, match="top_k=9"):
        ExpertShape(hidden=8, intermediate=8, local_experts=8, experts=8, top_k=9)
    with pytest.raises(Exception, match="moe_block_size.*whole number"):
        _hw(moe_block_size=100.5)
    with pytest.raises(Exception, match="moe_skip_dma_weight.*switch"):
        _hw(moe_skip_dma_weight=0.5)
