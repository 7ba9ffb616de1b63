"""A core's compute follows the sharding, and the Neuron libraries' layouts plan.

Every expected figure is a closed form of the config (the FLOPs of the matmuls a transformer
runs), never read from the implementation. The plans are dry runs of small Llama configs on
trn2.3xlarge at LNC 1 (8 logical cores), all in one process (tests/plan/layout_plans.py).
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from torch_neuronx.plan.models._load_config import load_config

SEQ = 256
# 8 heads and 8 KV heads: TP 1, 2, 4 and 8 all split them
DENSE = dict(hidden_size=256, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=8,
             intermediate_size=512, vocab_size=512, tie_word_embeddings=False)
# 2 KV heads: TP 8 replicates each 4 times (one per rank)
GQA = dict(DENSE, num_hidden_layers=4, num_key_value_heads=2)


def _matmul_weights(c: dict, tp: int = 1, layers: int | None = None, head: bool = True,
                    down: bool = True) -> float:
    """Weights one TP rank multiplies per token: q, o and the MLP split over TP; k and v split, or one
    replicated KV head per rank when TP exceeds the KV heads; the vocabulary head split. `down`:
    with the MLP's down projection."""
    h, n, kv, ff, v = (c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"],
                       c["intermediate_size"], c["vocab_size"])
    d = h // n
    kv_per_rank = max(kv // tp, 1) if kv % tp == 0 or tp % kv == 0 else None
    layer = 2 * h * n * d / tp + 2 * h * kv_per_rank * d + (3 if down else 2) * h * ff / tp
    return (layers if layers is not None else c["num_hidden_layers"]) * layer + (h * v / tp if head else 0)


def _attention_fwd(c: dict, tokens: int, seq: int, tp: int = 1, layers: int | None = None) -> float:
    """S = Q K^T and O = P V over all heads of a rank: 2 x 2 x tokens x seq x head_dim x heads / TP."""
    return 4 * tokens * seq * c["hidden_size"] / tp * (layers if layers is not None else c["num_hidden_layers"])


def train_flops_closed_form(c: dict, tokens: int, seq: int, tp: int = 1, checkpointing: bool = False,
                            layers: int | None = None) -> tuple[float, float]:
    """(matmul, attention) FLOPs of one rank's micro-step. Matmuls: forward 2 x tokens x weights,
    backward twice that (gradients of the input and of the weight); checkpointing runs the layers'
    forward again up to the last tensor the backward needs: torch's non-reentrant checkpoint stops
    there, so the MLP's down projection (whose output nobody saves) is not recomputed. Attention:
    the forward's 2 seq x seq x head_dim matmuls per head; the backward's 5 (dV = P^T dO,
    dP = dO V^T, dQ = dS K, dK = dS^T Q, and S recomputed), 2.5 times the forward."""
    w_all = _matmul_weights(c, tp, layers)
    w_layers = _matmul_weights(c, tp, layers, head=False, down=False)
    matmul = 6 * tokens * w_all + (2 * tokens * w_layers if checkpointing else 0)
    attn = _attention_fwd(c, tokens, seq, tp, layers) * (3.5 + (1 if checkpointing else 0))
    return matmul, attn


# a mixture of experts: 8 experts, 2 per token, every layer sparse
MOE = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, head_dim=32,
           intermediate_size=256, moe_intermediate_size=64, num_experts=8, num_experts_per_tok=2, vocab_size=256,
           tie_word_embeddings=False)


def _save(tmp, name, values, cls=None) -> str:
    from transformers import LlamaConfig

    path = tmp / name
    (cls or LlamaConfig)(**values).save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    """All the layouts, planned in one dry-run process of trn2.3xlarge LNC 1."""
    tmp = tmp_path_factory.mktemp("layouts")
    dense, gqa = _save(tmp, "dense", DENSE), _save(tmp, "gqa", GQA)
    # a config file of any name
    renamed = tmp / "llama-gqa.json"
    renamed.write_text((tmp / "gqa" / "config.json").read_text())
    inst = dict(instance="trn2.3xlarge", lnc=1)
    train = dict(micro_batch=1, seq_len=SEQ)
    specs = [{"command": "train", "config": dense, "layout": dict(inst, tp=tp, fsdp=8 // tp), "args": train}
             for tp in (1, 2, 4, 8)]
    specs += [
        {"command": "train", "config": str(renamed), "layout": dict(inst, tp=8), "args": train},
        {"command": "generate", "config": str(renamed), "layout": dict(inst, tp=8),
         "args": dict(batch=2, input_tokens=32, output_tokens=4)},
        {"command": "train", "config": gqa, "layout": dict(inst, tp=2, dp=4), "args": dict(train, zero1=True)},
    ]
    specs += [{"command": "train", "config": gqa, "layout": dict(inst, tp=2, pp=2, pp_schedule=s), "args": train}
              for s in ("gpipe", "1f1b", "interleaved")]
    from transformers import Qwen3MoeConfig

    moe = _save(tmp, "moe", MOE, Qwen3MoeConfig)
    specs += [{"command": "train", "config": moe, "layout": dict(inst, fsdp=8, ep=ep), "args": dict(train, seq_len=64)}
              for ep in (1, 8)]
    specs.append({"command": "train", "config": dense, "layout": dict(inst, tp=2, fsdp=4),
                  "args": dict(train, gradient_checkpointing=True)})
    # TP x DP with sequence parallelism (the default) at TP 2 and 4, and TP 8 without it
    specs += [{"command": "train", "config": dense, "layout": dict(inst, tp=tp, dp=8 // tp), "args": train}
              for tp in (2, 4)]
    specs.append({"command": "train", "config": dense, "layout": dict(inst, tp=8),
                  "args": dict(train, sequence_parallel=False)})
    # context parallelism: CP 2 and 4 beside FSDP (CP 1 is the TP 1 x FSDP 8 plan), TP 2 x CP 2, and a
    # GQA model with checkpointing (its recompute runs inside the ring too)
    specs += [{"command": "train", "config": dense, "layout": dict(inst, cp=cp, fsdp=8 // cp), "args": train}
              for cp in (2, 4)]
    specs.append({"command": "train", "config": dense, "layout": dict(inst, tp=2, cp=2, fsdp=2), "args": train})
    specs.append({"command": "train", "config": gqa, "layout": dict(inst, cp=2, fsdp=4),
                  "args": dict(train, gradient_checkpointing=True)})
    spec_path, out = tmp / "spec.json", tmp / "out.json"
    spec_path.write_text(json.dumps(specs))
    env = dict(os.environ, TORCH_NEURONX_DRY_RUN="1", TORCH_NEURONX_INSTANCE_TYPE="trn2.3xlarge",
               NEURON_LOGICAL_NC_CONFIG="1", TORCH_NEURONX_DRY_RUN_REPORT=os.devnull)
    p = subprocess.run([sys.executable, "-m", "tests.plan.layout_plans", str(spec_path), str(out)], env=env,
                       capture_output=True, text=True, timeout=900,
                       cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
    r = json.loads(out.read_text())
    return {"tp": dict(zip((1, 2, 4, 8), r[:4])), "kv_train": r[4], "kv_generate": r[5], "zero1": r[6],
            "pp": dict(zip(("gpipe", "1f1b", "interleaved"), r[7:10])), "ep": dict(zip((1, 8), r[10:12])),
            "checkpointed": r[12], "sp": {2: r[13], 4: r[14], 8: r[3]}, "no_sp": r[15],
            "cp": {1: r[0], 2: r[16], 4: r[17]}, "tp_cp": r[18], "cp_gqa_checkpointed": r[19]}


def _peak() -> float:
    from torch_neuronx.estimate import hardware

    return hardware("trn2.3xlarge", 1).peak_flops_bf16


def test_matmul_flops_per_core_scale_as_one_over_tp(plans):
    by_tp = plans["tp"]
    base = by_tp[1]["flops_by_category_per_micro_step"]["matmul"]
    for tp, r in by_tp.items():
        assert r["fits"] and r["tp"] == tp and r["fsdp"] == 8 // tp
        matmul, attn = train_flops_closed_form(DENSE, SEQ, SEQ, tp, checkpointing=r["gradient_checkpointing"])
        got = r["flops_by_category_per_micro_step"]
        assert got["matmul"] == pytest.approx(matmul, rel=0.01)
        assert got["attention"] == pytest.approx(attn, rel=0.01)
        assert got["matmul"] == pytest.approx(base / tp, rel=0.05)
    # the time follows (at these tiny shapes each matmul's pipeline fill and DMA latency dominate)
    assert by_tp[8]["time_breakdown_s"]["matmul"] < by_tp[4]["time_breakdown_s"]["matmul"] \
        < by_tp[1]["time_breakdown_s"]["matmul"]


def test_checkpointing_recomputes_the_layers_up_to_what_backward_needs(plans):
    r = plans["checkpointed"]
    matmul, attn = train_flops_closed_form(DENSE, SEQ, SEQ, 2, checkpointing=True)
    got = r["flops_by_category_per_micro_step"]
    assert got["matmul"] == pytest.approx(matmul, rel=0.01)
    assert got["attention"] == pytest.approx(attn, rel=0.01)


def test_flops_per_core_mfu_and_tokens_per_s_agree(plans):
    peak = _peak()
    for tp, r in [*plans["tp"].items(), (2, plans["checkpointed"])]:
        step, world = r["step_time_s"], r["world_size"]
        tokens = r["global_batch"] * r["seq_len"]
        assert r["mfu"] == pytest.approx(r["flops_per_core"] / (step * peak), rel=1e-9)
        assert r["tokens_per_s"] == pytest.approx(tokens / step, rel=1e-9)
        # MFU from throughput: tokens/s x FLOPs per token over every core's peak
        assert r["mfu"] == pytest.approx(r["tokens_per_s"] * r["flops_per_token"] / (world * peak), rel=1e-9)
        # and those FLOPs are the model's: each rank runs 1/TP of a sequence's closed-form FLOPs
        matmul, attn = train_flops_closed_form(DENSE, SEQ, SEQ, tp, checkpointing=r["gradient_checkpointing"])
        assert r["flops_per_core"] == pytest.approx(matmul + attn, rel=0.05)
        assert r["flops_per_token"] == pytest.approx((matmul + attn) * tp / SEQ, rel=0.05)


def test_closed_form_of_llama_3_1_8b_matches_the_published_dimensions():
    """The same closed form on examples/configs/llama-3.1-8b, 2048 tokens with checkpointing: 1.23e14
    FLOPs per core per micro-step at TP 1 and 1.54e13 at TP 8, the figures a TP plan must reach. The
    rule of thumb (6 x parameters x tokens + attention + a full recompute) gives ~1.36e14 and ~1.7e13:
    it counts the 0.5B-entry embedding table as matmul weights (a lookup is not: -6.5e12) and
    recomputes the down projections torch's checkpoint skips (-7.7e12)."""
    config = load_config(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "configs", "llama-3.1-8b"))
    c = {k: getattr(config, k) for k in DENSE}
    assert (c["hidden_size"], c["num_hidden_layers"], c["num_key_value_heads"], c["vocab_size"]) == (4096, 32, 8, 128256)
    tp1 = sum(train_flops_closed_form(c, 2048, 2048, 1, checkpointing=True))
    tp8 = sum(train_flops_closed_form(c, 2048, 2048, 8, checkpointing=True))
    assert tp1 == pytest.approx(1.23e14, rel=0.01)
    assert tp8 == pytest.approx(1.54e13, rel=0.01)
    h, ff, v, t = 4096, 14336, 128256, 2048
    rule_of_thumb = tp1 + 6 * t * h * v + 2 * t * 32 * h * ff
    assert rule_of_thumb == pytest.approx(1.36e14, rel=0.01)


def test_tp_beyond_the_kv_heads_replicates_them(plans):
    r, g = plans["kv_train"], plans["kv_generate"]
    for rep in (r, g):
        assert (rep["kv_heads_per_rank"], rep["kv_head_copies"]) == (1, 4)
        # the model's own parameters, not the copies
        h, n, kv, ff, v, layers = (GQA[k] for k in ("hidden_size", "num_attention_heads", "num_key_value_heads",
                                                    "intermediate_size", "vocab_size", "num_hidden_layers"))
        d = h // n
        own = 2 * h * v + h + layers * (2 * h * h + 2 * h * kv * d + 3 * h * ff + 2 * h)
        assert rep["parameters"] == own
    # memory: each rank holds its KV head's k_proj and v_proj whole; q, o, MLP, embedding and head 1/8
    h, d = GQA["hidden_size"], GQA["hidden_size"] // GQA["num_attention_heads"]
    per_rank = (2 * h * GQA["vocab_size"] / 8 + h
                + GQA["num_hidden_layers"] * (2 * h * h / 8 + 2 * h * d + 3 * h * GQA["intermediate_size"] / 8 + 2 * h))
    assert r["memory_breakdown_bytes_per_core"]["parameters"] == pytest.approx(2 * per_rank, rel=0.01)
    matmul, attn = train_flops_closed_form(GQA, SEQ, SEQ, 8)
    assert r["flops_by_category_per_micro_step"]["matmul"] == pytest.approx(matmul, rel=0.01)
    # generate: a static KV cache of one head per rank (keys and values, bf16)
    cache = g["memory_breakdown_bytes_per_core"]["kv_cache"]
    per_token = GQA["num_hidden_layers"] * 2 * 2 * 1 * d * 2
    assert 35 * per_token <= cache <= 36 * per_token          # 32 + 4 tokens, static
    assert g["fits"] and g["tpot_ms"] > 0


def test_tp_x_zero1_shards_the_optimizer_state_over_dp(plans):
    r = plans["zero1"]
    assert r["fits"] and (r["tp"], r["dp"], r["zero1"]) == (2, 4, True)
    mem = r["memory_breakdown_bytes_per_core"]
    # AdamW's two moments of 1/DP of this rank's TP shard
    assert mem["optimizer_state"] == pytest.approx(2 * mem["parameters"] / 4, rel=0.01)
    for kind in ("reduce_scatter", "all_gather"):     # gradients in, updated parameters out, over DP
        assert r["collectives"][kind]["bytes"] >= mem["parameters"]


def test_pipeline_schedules_match_their_closed_form(plans):
    p = 2
    layers = GQA["num_hidden_layers"] // p
    for name, r in plans["pp"].items():
        pipe = r["pipeline"]
        v = 2 if name == "interleaved" else 1
        m = r["grad_accum_steps"]
        assert (pipe["schedule"], pipe["stages"], pipe["chunks_per_stage"], m) == (name, p, v, 2 * p * v)
        assert pipe["bubble_fraction"] == pytest.approx((p - 1) / (v * m))
        t = pipe["stage_micro_step_s"] + pipe["p2p_s_per_microbatch"]
        assert pipe["pipeline_s"] == pytest.approx((m + (p - 1) / v) * t, rel=1e-9)
        assert r["step_time_s"] == pytest.approx(pipe["pipeline_s"] + r["optimizer_step_s"], rel=1e-9)
        # the stage computes its half of the layers (and the head), split over TP 2
        matmul, _ = train_flops_closed_form(GQA, SEQ, SEQ, 2, layers=layers)
        assert r["flops_by_category_per_micro_step"]["matmul"] == pytest.approx(matmul, rel=0.01)
        held = {"gpipe": m, "1f1b": min(m, p), "interleaved": min(m * v, (v - 1) * p + 2 * (p - 1) + 1) / v}[name]
        assert pipe["first_stage_microbatches_in_flight"] == held
        assert pipe["first_stage_peak_bytes_estimate"] == r["peak_hbm_bytes_per_core"] + math.floor(
            (held - 1) * pipe["activation_bytes_per_microbatch"])
        assert pipe["p2p"]["bytes_per_transfer"] == SEQ * GQA["hidden_size"] * 2 // 2   # each TP rank's half
    assert plans["pp"]["interleaved"]["pipeline"]["bubble_fraction"] < plans["pp"]["1f1b"]["pipeline"]["bubble_fraction"]


def test_expert_parallelism_moves_tokens_instead_of_experts(plans):
    """FSDP 8 over a MoE: without EP every rank all-gathers every expert; with EP 8 each rank keeps
    one expert whole and the tokens travel (all-to-all). Each rank's expert FLOPs are its tokens'
    (top-2 of 8 experts) either way: the closed form counts attention projections, the router, two
    experts' SwiGLU MLPs per token and the head."""
    one, eight = plans["ep"][1], plans["ep"][8]
    h, n, d, mi, e, k, v, layers = (MOE[x] for x in ("hidden_size", "num_attention_heads", "head_dim",
                                                      "moe_intermediate_size", "num_experts", "num_experts_per_tok",
                                                      "vocab_size", "num_hidden_layers"))
    tokens = 64
    weights = layers * (4 * h * n * d + h * e + k * 3 * h * mi) + h * v
    for r in (one, eight):
        assert r["fits"]
        assert r["flops_by_category_per_micro_step"]["matmul"] == pytest.approx(6 * tokens * weights, rel=0.02)
    assert "all_to_all" in eight["collectives"] and "all_to_all" not in one["collectives"]
    assert eight["collectives"]["all_gather"]["bytes"] < 0.5 * one["collectives"]["all_gather"]["bytes"]


NORMS_AND_RESIDUALS = ("input_layernorm", "post_attention_layernorm", "norm", "layers")


def _norm_and_residual_bytes(r) -> int:
    """HBM bytes of a micro-step's vector-engine ops inside the RMSNorms and the decoder layers'
    own code (the residual adds), forward and backward."""
    return sum(r["vector_bytes_by_module_per_micro_step"].get(k, 0) for k in NORMS_AND_RESIDUALS)


def test_sequence_parallelism_splits_norms_and_residuals_over_tp(plans):
    """With sequence parallelism (NxD Training's TP) a rank's RMSNorms and residual adds run on
    1/TP of the tokens: their vector-engine bytes are 1/TP of TP 1's (within 20%: the input
    gradients of the unfused q/k/v projections are summed at full length before their
    reduce-scatter). Without it they stay whole on every rank. Matmul FLOPs are the same closed
    form either way, and sequence parallelism reduce-scatters and all-gathers where TP all-reduces."""
    base = _norm_and_residual_bytes(plans["tp"][1])
    for tp, r in plans["sp"].items():
        assert r["sequence_parallel"] and r["tp"] == tp
        assert _norm_and_residual_bytes(r) == pytest.approx(base / tp, rel=0.2), tp
        matmul, attn = train_flops_closed_form(DENSE, SEQ, SEQ, tp)
        assert r["flops_by_category_per_micro_step"]["matmul"] == pytest.approx(matmul, rel=0.01)
    off = plans["no_sp"]
    assert not off["sequence_parallel"] and off["sequence_parallel_note"] == "off (--no-sequence-parallel)"
    assert _norm_and_residual_bytes(off) > 4 * _norm_and_residual_bytes(plans["sp"][8])
    assert {"all_gather", "reduce_scatter"} <= set(plans["sp"][8]["collectives"])
    # what is left to all-reduce with it: the vocabulary-parallel loss's per-token maxima and sums
    sp_reduced = plans["sp"][8]["collectives"].get("all_reduce", {}).get("bytes", 0)
    assert off["collectives"]["all_reduce"]["bytes"] > 50 * sp_reduced


def _ring_attention(c: dict, cp: int, tp: int = 1, checkpointing: bool = False) -> float:
    """Attention FLOPs of one CP rank's micro-step. The load-balanced ring gives each rank chunks r
    and 2 CP - 1 - r of the sequence: its first step is the causal block of its own S / CP tokens
    (counted whole, as CP 1's causal attention is), each of the CP - 1 others half a block (its
    queries against the earlier chunk only, or its later chunk against both). Backward and
    recompute as for CP 1 (3.5x the forward, 4.5x with checkpointing)."""
    local = SEQ // cp
    return _attention_fwd(c, local, local, tp) * (1 + (cp - 1) / 2) * (3.5 + (1 if checkpointing else 0))


def _kv_all_gather_bytes(c: dict) -> int:
    """One ring all-gather: every rank's keys and values (one flat tensor), i.e. the whole sequence's."""
    head_dim = c["hidden_size"] // c["num_attention_heads"]
    return 2 * SEQ * c["num_key_value_heads"] * head_dim * 2   # K and V, bf16


def test_context_parallelism_splits_the_sequence_and_rings_the_keys(plans):
    """With CP each rank runs 1/CP of the tokens through every matmul and its share of the causal
    attention as a ring: the matmul FLOPs are 1/CP of CP 1's closed form; the ring adds one
    all-gather of the keys and values per layer in the forward and one in the backward, over the
    CP group; FSDP shards over FSDP x CP, so the parameters per core stay as at CP 1 and the
    activations shrink."""
    base = plans["cp"][1]
    layers = DENSE["num_hidden_layers"]
    for cp, r in plans["cp"].items():
        assert r["fits"] and r["cp"] == cp and r["fsdp"] == 8 // cp and (f"CP{cp}" in r["layout"]) == (cp > 1)
        got = r["flops_by_category_per_micro_step"]
        matmul, _ = train_flops_closed_form(DENSE, SEQ // cp, SEQ)
        assert got["matmul"] == pytest.approx(matmul, rel=0.01)
        assert got["matmul"] == pytest.approx(base["flops_by_category_per_micro_step"]["matmul"] / cp, rel=0.05)
        assert got["attention"] == pytest.approx(_ring_attention(DENSE, cp), rel=0.01)
        assert r["memory_breakdown_bytes_per_core"]["parameters"] == base["memory_breakdown_bytes_per_core"]["parameters"]
        # CP ranks share a sequence: only the FSDP ranks split the batch
        assert r["global_batch"] == 8 // cp
        if cp > 1:
            extra = r["collectives"]["all_gather"]["count"] - base["collectives"]["all_gather"]["count"]
            extra_bytes = r["collectives"]["all_gather"]["bytes"] - base["collectives"]["all_gather"]["bytes"]
            assert extra == 2 * layers
            assert extra_bytes == 2 * layers * _kv_all_gather_bytes(DENSE)
    assert plans["cp"][4]["peak_hbm_bytes_per_core"] < plans["cp"][2]["peak_hbm_bytes_per_core"] \
        < base["peak_hbm_bytes_per_core"]


def test_context_parallelism_with_tp_and_with_checkpointing(plans):
    """TP 2 x CP 2: each rank's matmuls are TP 2's weights on half the tokens; a GQA model with
    checkpointing stays on SDPA's causal path inside the ring (no mask is built)."""
    r = plans["tp_cp"]
    matmul, _ = train_flops_closed_form(DENSE, SEQ // 2, SEQ, tp=2)
    assert r["flops_by_category_per_micro_step"]["matmul"] == pytest.approx(matmul, rel=0.01)
    assert r["flops_by_category_per_micro_step"]["attention"] == pytest.approx(_ring_attention(DENSE, 2, tp=2), rel=0.01)
    g = plans["cp_gqa_checkpointed"]
    matmul, _ = train_flops_closed_form(GQA, SEQ // 2, SEQ, checkpointing=True)
    assert g["flops_by_category_per_micro_step"]["matmul"] == pytest.approx(matmul, rel=0.01)
    assert g["flops_by_category_per_micro_step"]["attention"] == pytest.approx(
        _ring_attention(GQA, 2, checkpointing=True), rel=0.01)
    mfu = g["flops_per_core"] / (g["step_time_s"] * _peak())
    assert g["mfu"] == pytest.approx(mfu, rel=1e-9)
    assert g["tokens_per_s"] == pytest.approx(g["global_batch"] * SEQ / g["step_time_s"], rel=1e-9)
