"""`plan generate --ep` in the deployed mode: the experts split within the TP group as vLLM-Neuron's
`ep_degree` splits them (docs/moe.md, "Expert parallelism in `plan generate`").

A tiny Qwen3-MoE (2 layers, hidden 128, 8 experts of intermediate 64, top 2) at TP 4 on a
trn2.3xlarge at LNC 2 (4 ranks), one 256-token prompt, each plan a dry run of the command line in
its own process. With EP E each rank holds 8 / E experts whose intermediate its EP group's 4 / E
ranks split (64 x E / 4 each); attention and the dense layers stay TP 4, and the experts' outputs
combine in the all-reduce the TP MoE block already has. Blocks of 64 tokens (`moe_block_size=64`)
make the blockwise kernel's block count depend on the rank's local experts.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from torch_neuronx.plan.__main__ import main as plan_main
from torch_neuronx.plan.models._routing import parse

INSTANCE, LNC, TP = "trn2.3xlarge", 2, 4
L, H, I, E, K, V = 2, 128, 64, 8, 2, 1024
TOKENS, BLOCK = 256, 64           # the prompt fills its 256-token bucket; blocks of 64 tokens
CONFIG = dict(hidden_size=H, num_hidden_layers=L, num_attention_heads=4, num_key_value_heads=4, head_dim=32,
              intermediate_size=256, moe_intermediate_size=I, num_experts=E, num_experts_per_tok=K,
              vocab_size=V, mlp_only_layers=[], decoder_sparse_step=1, tie_word_embeddings=False)
BLOCKS = f"moe_block_size={BLOCK}"
SKIPPING = BLOCKS + ",moe_skip_padded_blocks=1,moe_skip_dma_token=1"   # only blocks and rows that hold tokens


def _plan(tmp, folder, *argv, name, assumptions=BLOCKS):
    """The command line's dry run in a fresh process: (report, printed report)."""
    out = tmp / f"{name}.json"
    env = dict(os.environ, TORCH_NEURONX_ESTIMATE_ASSUMPTIONS=assumptions)
    for var in ("TORCH_NEURONX_INSTANCE_TYPE", "NEURON_LOGICAL_NC_CONFIG", "TORCH_NEURONX_DRY_RUN"):
        env.pop(var, None)
    p = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "generate", "--config", str(folder),
                        "--instance", INSTANCE, "--lnc", str(LNC), "--tp", str(TP), "--input-tokens", "250",
                        "--output-tokens", "6", "--buckets", str(TOKENS), "--max-model-len", str(TOKENS),
                        "--json", str(out), *argv], env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    return json.loads(out.read_text()), p.stdout


@pytest.fixture(scope="module")
def moe_dir(tmp_path_factory):
    from transformers import Qwen3MoeConfig

    folder = tmp_path_factory.mktemp("qwen3-moe")
    Qwen3MoeConfig(**CONFIG).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def plans(moe_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ep-plans")
    out = {ep: _plan(tmp, moe_dir, "--ep", str(ep), name=f"ep{ep}") for ep in (1, 4)}
    out[2] = _plan(tmp, moe_dir, "--ep", "2", "--html", str(tmp / "ep2.html"), name="ep2")
    out["html"] = (tmp / "ep2.html").read_text()
    out["skewed"] = _plan(tmp, moe_dir, "--ep", "2", "--routing", "skewed=3", name="skewed", assumptions=SKIPPING)
    return out


def _local(ep: int) -> tuple[int, int]:
    """(experts, intermediate) one rank holds under EP `ep` at TP 4."""
    return E // ep, I * ep // TP


def _expert_bytes(ep: int) -> int:
    """One local expert's gate, up and down projections on a rank, bf16."""
    return 3 * H * _local(ep)[1] * 2


def _blocks(ep: int) -> int:
    """N, the blocks the kernel provisions for all 256 x 2 pairs over the rank's local experts."""
    local = _local(ep)[0]
    return math.ceil((TOKENS * K - (local - 1)) / BLOCK) + local - 1


@pytest.mark.parametrize("ep", [1, 2, 4])
def test_expert_weights_per_core_equal_the_closed_form(plans, ep):
    """E / EP experts x 3 x H x (I x EP / TP) x 2 B per layer: EP moves which expert rows a rank holds,
    not how many bytes, so the rank's parameters are the same at every EP."""
    r, text = plans[ep]
    moe = r["moe"]
    local, inter = _local(ep)
    assert (moe["ep"], moe["experts_per_rank"], moe["intermediate_per_rank"], moe["tp_per_expert"]) == \
        (ep, local, inter, TP // ep)
    assert moe["expert_weight_bytes_per_core"] == L * local * 3 * H * inter * 2 == L * E * 3 * H * I // TP * 2
    assert r["memory_breakdown_bytes_per_core"]["parameters"] == \
        plans[1][0]["memory_breakdown_bytes_per_core"]["parameters"]
    assert r["ep"] == ep and (f"TP{TP} EP{ep}" in r["layout"]) == (ep > 1)
    split = (f"each rank holds {local} of the {E} experts" if ep > 1 else f"every rank holds all {E} experts")
    assert split in text


@pytest.mark.parametrize("ep", [1, 2, 4])
def test_prefill_kernel_blocks_and_weight_traffic_equal_the_closed_form(plans, ep):
    """Every rank runs all 256 tokens against its local experts (vLLM-Neuron's prefill): balanced, each
    expert takes 256 x 2 / 8 = 64 tokens, one block; the kernel provisions N = ceil((512 - (E_local - 1))
    / 64) + E_local - 1 blocks (15, 11, 9 at EP 1, 2, 4), runs them all and loads a local expert's
    weights per block. The experts' FLOPs per core, N x 64 rows x 2 x 3 x H x I_local, grow with EP:
    N is provisioned for every routed pair while the rank's intermediate grows EP-fold."""
    cte = plans[ep][0]["moe"]["context_encoding"]
    local, inter = _local(ep)
    n = _blocks(ep)
    assert (cte["algorithm"], cte["tokens"], cte["blocks"], cte["blocks_run"]) == ("blockwise", TOKENS, n, n)
    assert cte["blocks_with_tokens"] == local
    assert cte["weight_bytes"] == n * _expert_bytes(ep)
    assert cte["flops"] == n * BLOCK * 2 * 3 * H * inter
    assert cte["token_bytes"] == 3 * n * BLOCK * H * 2


def test_the_compiled_prefill_carries_the_kernel_of_the_local_experts(plans):
    """The CTE graphs of EP 1, 2 and 4 differ by exactly their kernels' FLOPs, layer by layer: the rest
    of the step (attention, router, dense layers at TP 4) is the same program."""
    flops = {ep: plans[ep][0]["graphs"]["context_encoding"]["flops"] for ep in (1, 2, 4)}
    kernel = {ep: _blocks(ep) * BLOCK * 2 * 3 * H * _local(ep)[1] for ep in (1, 2, 4)}
    for ep in (2, 4):
        assert flops[ep] - flops[1] == L * (kernel[ep] - kernel[1])


def test_decode_runs_all_local_experts_under_ep(plans):
    """One token, top 2 of 8: TP alone loads the 2 routed experts selectively; NxD Inference has no
    selective loading under EP, so each rank runs its E_local experts on the token, loading each once:
    E_local x 3 x H x I_local x 2 B = E x 3 x H x I / TP x 2 B, the same at every EP > 1."""
    tkg = {ep: plans[ep][0]["moe"]["token_generation"] for ep in (1, 2, 4)}
    assert (tkg[1]["algorithm"], tkg[1]["expert_loads"], tkg[1]["weight_bytes"]) == ("selective", K, K * _expert_bytes(1))
    for ep in (2, 4):
        local, inter = _local(ep)
        assert (tkg[ep]["algorithm"], tkg[ep]["expert_loads"]) == ("all_experts", local)
        assert tkg[ep]["weight_bytes"] == local * _expert_bytes(ep) == E * 3 * H * I // TP * 2
        assert tkg[ep]["flops"] == local * 2 * 3 * H * inter


def test_skewed_routing_costs_the_busiest_ranks_experts(plans):
    """skewed=3 at EP 2: the plan's rank holds experts 0-3, the busiest; with padded blocks skipped and
    only routed rows moved, it runs sum(ceil(load / 64)) blocks of its own experts' loads and moves
    3 x sum(loads) rows of H x 2 B."""
    cte = plans["skewed"][0]["moe"]["context_encoding"]
    loads = parse("skewed=3").loads(TOKENS, E, K)[:E // 2]
    used = sum(math.ceil(n / BLOCK) for n in loads)
    assert loads[0] > TOKENS * K // E and cte["blocks"] == _blocks(2)
    assert (cte["blocks_with_tokens"], cte["blocks_run"]) == (used, used)
    assert cte["weight_bytes"] == used * _expert_bytes(2)
    assert cte["token_bytes"] == 3 * sum(loads) * H * 2
    assert cte["flops"] == used * BLOCK * 2 * 3 * H * _local(2)[1]


@pytest.mark.parametrize("ep", [1, 2, 4])
def test_the_experts_combine_in_the_tp_all_reduce_without_extra_bytes(plans, ep):
    """Per step: one all-reduce after the embedding and two per layer (attention's output projection,
    the MoE block's combine), each of tokens x H x 2 B, and the last position's logits gathered
    (V x 2 B); no all-to-all: vLLM-Neuron's EP sums the experts' outputs in the TP group's all-reduce."""
    r = plans[ep][0]
    for graph, tokens in (("context_encoding", TOKENS), ("token_generation", 1)):
        c = r["graphs"][graph]["collectives"]
        assert set(c) == {"all_reduce", "all_gather"}
        assert (c["all_reduce"]["count"], c["all_reduce"]["bytes"]) == (1 + 2 * L, (1 + 2 * L) * tokens * H * 2)
        assert (c["all_gather"]["count"], c["all_gather"]["bytes"]) == (1, V * 2)


def test_the_html_page_says_how_the_experts_are_split(plans):
    assert "each rank holds 4 of the 8 experts, intermediate 32 of 64" in plans["html"]


@pytest.mark.parametrize("argv, message", [
    (["--tp", "4", "--ep", "3"], "--ep 3 must divide --tp 4"),
    (["--tp", "4", "--ep", "0"], "--ep must be a positive integer"),
    (["--tp", "2", "--ep", "2", "--mode", "eager"], "--ep plans the deployed mode"),
])
def test_bad_ep_flags_stop_with_the_reason(argv, message, tiny_config_dir, plan_env, capsys):
    with pytest.raises(SystemExit) as stop:
        plan_main(["generate", "--config", tiny_config_dir, "--instance", INSTANCE, "--real", *argv])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and message in err


def test_ep_against_the_model_names_the_valid_sizes():
    """EP must divide the experts as well as TP, and a dense model has none to split."""
    from transformers import Qwen3Config, Qwen3MoeConfig

    from torch_neuronx.plan.models._deployed import plan_deployed
    from torch_neuronx.plan.models._layout import LayoutError, make_layout, serving_expert_parallel

    layout = make_layout(INSTANCE, LNC, tp=4)
    six = Qwen3MoeConfig(**{**CONFIG, "num_experts": 6})
    with pytest.raises(LayoutError, match=r"--ep 4 must divide --tp 4 and the model's 6 experts .*: \[1, 2\]"):
        serving_expert_parallel(layout, 4, six)
    assert serving_expert_parallel(layout, 2, six).ep == 2
    dense = Qwen3Config(hidden_size=H, num_hidden_layers=L, num_attention_heads=4, num_key_value_heads=4,
                        intermediate_size=256, vocab_size=V)
    with pytest.raises(LayoutError, match="--ep 2: the model has no experts .*use --ep 1"):
        plan_deployed(dense, serving_expert_parallel(layout, 2))   # stops before anything is built
