"""MoE plans route by a stated distribution and cost experts as NxD Inference runs them.

Routing (plan/models/_routing.py) is checked on its own; the plans are dry runs of the small
Qwen3-MoE config of test_layout_scaling.py (hidden 128, 8 experts, top 2, 2 layers, moe
intermediate 64) on trn2.3xlarge at LNC 1, all in one process (tests/plan/moe_plans.py). Every
expected figure is a closed form of the config and the routing, never read from the implementation.
"""
from __future__ import annotations

import json
import math

import pytest
import torch

from tests.plan.moe_plans import plan_in_child
from tests.plan.test_layout_scaling import MOE, _save
from torch_neuronx.plan.models._options import OptionsError, TrainOptions
from torch_neuronx.plan.models._routing import Routing, parse

E, K, H, LAYERS = MOE["num_experts"], MOE["num_experts_per_tok"], MOE["hidden_size"], MOE["num_hidden_layers"]
SEQ = 64   # tokens per rank per micro-step in the train plans


def test_balanced_is_the_default_and_loads_are_whole_tokens():
    r = parse(None)
    assert r == parse("balanced") and r.kind == "balanced"
    assert r.loads(64, 8, 2) == [16] * 8
    assert sum(r.loads(10, 8, 3)) == 30 and max(r.loads(10, 8, 3)) - min(r.loads(10, 8, 3)) <= 1


@pytest.mark.parametrize("skew", [1.0, 2.0, 3.0, 4.0])
def test_skewed_gives_the_busiest_expert_s_times_its_share(skew):
    r = parse(f"skewed={skew:g}")
    shares = r.shares(8, 2)
    assert sum(shares) == pytest.approx(1.0)
    assert shares[0] * 8 == pytest.approx(skew, rel=1e-6)
    assert shares == sorted(shares, reverse=True)   # expert 0 busiest, the tail decreasing
    loads = r.loads(1000, 8, 2)
    assert sum(loads) == 2000 and max(loads) <= 1000
    assert loads[0] == pytest.approx(skew * 250, abs=1)


def test_indices_realise_the_loads_with_distinct_experts_per_token():
    for r in (parse("balanced"), parse("skewed=3.5"), Routing("histogram", counts=(3, 1, 1, 1, 0, 0, 0, 0))):
        idx = r.indices(96, 8, 2)
        assert idx.shape == (96, 2) and idx.dtype == torch.long
        assert bool((idx[:, 0] != idx[:, 1]).all())
        assert torch.bincount(idx.flatten(), minlength=8).tolist() == r.loads(96, 8, 2)


def test_histogram_file(tmp_path):
    path = tmp_path / "hist.json"
    path.write_text(json.dumps({"counts": [30, 10, 10, 10, 10, 10, 10, 10]}))
    r = parse(str(path))
    assert r.kind == "histogram" and r.shares(8, 2)[0] == pytest.approx(0.3)
    assert r.loads(100, 8, 2)[0] == 60
    with pytest.raises(ValueError, match="has 16 experts"):
        r.shares(16, 2)
    with pytest.raises(ValueError, match="more than 1 / top_k"):
        r.shares(8, 4)


@pytest.mark.parametrize("spec, match", [
    ("skewed", "skewed=S takes S >= 1"), ("skewed=0.5", "S >= 1"), ("skewed=x", "S >= 1"),
    ("/no/such/file.json", "not balanced, skewed=S nor a readable histogram file"),
])
def test_bad_routing_names_the_flag(spec, match):
    with pytest.raises(ValueError, match="--routing.*" + match.split()[0]):
        parse(spec)


def test_bad_routing_files_and_peaks(tmp_path):
    bad = tmp_path / "bad.json"
    for text in ("[1, -2]", "[]", "{\"counts\": \"x\"}", "[0, 0]"):
        bad.write_text(text)
        with pytest.raises(ValueError, match="JSON list of token counts"):
            parse(str(bad))
    bad.write_text("not json")
    with pytest.raises(ValueError, match="not JSON"):
        parse(str(bad))
    with pytest.raises(ValueError, match=r"use S in \[1, 4\]"):
        parse("skewed=5").shares(8, 2)


def test_the_command_line_checks_routing_before_planning():
    common = dict(config="c", instance="trn2.3xlarge", lnc=1, nodes=1, tp=1, dtype="bfloat16", json=None,
                  real=False, html=None, quiet=True, verbose=False, pp=1, pp_schedule="1f1b", pp_chunks=None,
                  ep=1, fsdp=8, dp=None, zero1=False, micro_batch=1, global_batch=None, seq_len=64,
                  gradient_checkpointing=False)
    with pytest.raises(OptionsError, match="--routing"):
        TrainOptions(**common, routing="skewed=0")
    opts = TrainOptions(**common, routing="skewed=2")
    argv = opts.argv()   # handed on to the plan's own process
    at = argv.index("--routing")
    assert argv[at:at + 2] == ["--routing", "skewed=2"]


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    from transformers import Qwen3MoeConfig

    tmp = tmp_path_factory.mktemp("moe")
    moe = _save(tmp, "moe", MOE, Qwen3MoeConfig)
    inst = dict(instance="trn2.3xlarge", lnc=1)
    train = dict(micro_batch=1, seq_len=SEQ)
    specs = [{"command": "train", "config": moe, "layout": dict(inst, fsdp=8, ep=8), "args": dict(train, routing=r)}
             for r in ("balanced", "skewed=3")]
    deployed = dict(batch=1, input_tokens=600, output_tokens=4)   # NxD Inference's buckets: 128, 256, 604
    specs += [{"command": "deployed", "config": moe, "layout": dict(inst, tp=2), "args": deployed},
              {"command": "deployed", "config": moe, "layout": dict(inst, tp=2), "args": deployed,
               "assumptions": "moe_block_size=256"},
              {"command": "deployed", "config": moe, "layout": dict(inst, tp=2), "args": dict(deployed, batch=4)},
              {"command": "deployed", "config": moe, "layout": dict(inst, tp=2),
               "args": dict(deployed, decode_batch=4)}]
    r = plan_in_child(specs, tmp)
    return {"balanced": r[0], "skewed": r[1], "deployed": r[2], "block_256": r[3], "batch_4": r[4],
            "padded_to_4": r[5]}


@pytest.mark.parametrize("routing", ["balanced", "skewed"])
def test_expert_parallel_all_to_all_bytes_equal_the_closed_form(plans, routing):
    """EP 8 over 8 experts, one per rank, T = 64 tokens per rank, top 2, bf16 rows of H = 128. Per MoE
    layer and micro-step transformers' all-to-all EP exchanges the per-expert counts (E int64), sends
    T x top_k rows and receives R rows (forward), then the gradients of both (backward): 5
    all-to-alls of E x 8 + 2 x T x top_k x H x 2 + 2 x R x H x 2 bytes. R, the rows the plan's rank
    (expert 0, the busiest) receives, is EP x its load: every peer routes as it does."""
    r = plans[routing]
    load0 = {"balanced": SEQ * K // E, "skewed": parse("skewed=3").loads(SEQ, E, K)[0]}[routing]
    received = 8 * load0
    per_layer = E * 8 + 2 * SEQ * K * H * 2 + 2 * received * H * 2
    a2a = r["collectives"]["all_to_all"]
    assert a2a["count"] == 5 * LAYERS
    assert a2a["bytes"] == LAYERS * per_layer
    assert r["moe"]["rows_received_by_busiest_rank"] == received
    assert r["moe"]["expert_loads"] == parse({"balanced": None, "skewed": "skewed=3"}[routing]).loads(SEQ, E, K)


def test_a_skewed_routing_loads_the_busiest_rank(plans):
    """The busiest rank runs 3x the balanced rows through its expert (48 x 8 = 384 rows vs 128): its
    expert matmuls, forward and backward, grow by the extra rows x 6 x 3 x H x I per layer."""
    bal, skew = plans["balanced"], plans["skewed"]
    extra_rows = 8 * (parse("skewed=3").loads(SEQ, E, K)[0] - SEQ * K // E)
    grown = skew["flops_by_category_per_micro_step"]["matmul"] - bal["flops_by_category_per_micro_step"]["matmul"]
    assert grown == pytest.approx(LAYERS * extra_rows * 6 * 3 * H * MOE["moe_intermediate_size"], rel=1e-6)


def test_deployed_prefill_runs_the_blockwise_kernel_with_its_padding(plans):
    """A 600-token prompt runs in the 604-token bucket (NxD Inference's last automatic bucket, the max
    length) at TP 2 (the rank's intermediate 64 / 2 = 32): 1,208 routed pairs in blocks of 512
    provision N = ceil((1,208 - 7) / 512) + 7 = 10 blocks per layer, all run, each loading its expert's
    3 x 128 x 32 x 2 B of weights. Blocks of 256: N = ceil(1,201 / 256) + 7 = 12. The CTE graph's
    FLOPs differ by exactly the kernel's: layers x (10 x 512 - 12 x 256) rows x 2 x 3 x H x 32."""
    d, d256 = plans["deployed"], plans["block_256"]
    cte = d["moe"]["context_encoding"]
    assert (cte["algorithm"], cte["tokens"], cte["blocks"], cte["blocks_run"]) == ("blockwise", 604, 10, 10)
    assert cte["blocks_with_tokens"] == 8   # 151 tokens per expert: one block each
    assert cte["weight_bytes"] == 10 * 3 * H * 32 * 2
    assert d256["moe"]["context_encoding"]["blocks"] == 12
    rows = 10 * 512 - 12 * 256
    delta = d["graphs"]["context_encoding"]["flops"] - d256["graphs"]["context_encoding"]["flops"]
    assert delta == LAYERS * rows * 2 * 3 * H * 32
    assert d["moe"]["layers"] == LAYERS and d["moe"]["routing"] == "balanced"
    # the padded kernel computes 5,120 rows for the 1,208 routed ones
    assert cte["flops"] == 10 * 512 * 2 * 3 * H * 32


def test_deployed_decode_loads_experts_selectively_then_all(plans):
    """Batch 1: 1 x 2 / 8 < 1, selective loading of the 2 routed experts; batch 4: 4 x 2 / 8 = 1,
    every expert loads once and runs all 4 tokens."""
    one, four = plans["deployed"]["moe"]["token_generation"], plans["batch_4"]["moe"]["token_generation"]
    w = 3 * H * 32 * 2
    assert (one["algorithm"], one["expert_loads"], one["weight_bytes"]) == ("selective", 2, 2 * w)
    assert (four["algorithm"], four["expert_loads"], four["weight_bytes"]) == ("all_experts", 8, 8 * w)
    assert four["flops"] == 4 * 8 * 2 * 3 * H * 32


def test_a_decode_batch_padded_to_4_loads_every_expert_for_one_live_sequence(plans):
    """One live sequence in a decode graph compiled for 4 (--decode-batch 4, as a server compiled for
    max_num_seqs 4 runs it): the kernel sees 4 tokens, 4 x 2 / 8 = 1, so every expert loads, as at
    batch 4; the context encoding is the one sequence's, as at batch 1."""
    padded, four, one = plans["padded_to_4"], plans["batch_4"], plans["deployed"]
    assert padded["moe"]["token_generation"] == four["moe"]["token_generation"]
    assert padded["moe"]["context_encoding"] == one["moe"]["context_encoding"]
    assert padded["graphs"]["token_generation"]["seconds"] == pytest.approx(four["graphs"]["token_generation"]["seconds"])
    assert padded["tpot_ms"] > one["tpot_ms"]


def test_the_kernel_op_computes_what_transformers_experts_compute():
    """The op a deployed plan runs in place of the experts module gives the same output as
    transformers' own experts (eager implementation) on CPU, for any routing."""
    from transformers import Qwen3MoeConfig
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeExperts

    from torch_neuronx.plan.models._moe_kernel import routed_experts, supported

    torch.manual_seed(0)
    config = Qwen3MoeConfig(hidden_size=32, moe_intermediate_size=16, num_experts=6, num_experts_per_tok=2)
    config._experts_implementation = "eager"
    experts = Qwen3MoeExperts(config)
    torch.nn.init.normal_(experts.gate_up_proj, std=0.2)
    torch.nn.init.normal_(experts.down_proj, std=0.2)
    hidden = torch.randn(10, 32)
    index = parse("skewed=2").indices(10, 6, 2)
    weights = torch.rand(10, 2)
    ref = experts(hidden, index, weights)
    got = routed_experts(hidden, index, weights, experts.gate_up_proj.detach(), experts.down_proj.detach(), 10, 6)
    assert supported(experts)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    assert math.isfinite(float(got.abs().sum())) and float(got.abs().sum()) > 0
