"""`plan generate` in its deployed mode (compiled CTE and TKG graphs, static KV cache, on-device
sampling), each plan a dry run of the command line in its own process (trn2.3xlarge LNC=2, TP 1).

With every launch cost and the host sync at zero and HBM efficiency 1, a decode step whose matmuls
are large enough to be memory-bound (their weights take longer to stream than the TensorEngine's
first-tile DMA latency) must take the roofline: the bytes of the weights it reads (every parameter
but the embedding table, of which it reads one row per token) and of the static KV cache it reads
(a decode step attends over all `max_model_len` positions, the context encoding within its
bucket), over the HBM bandwidth of neuron_hardware's table.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import neuron_hardware
from torch_neuronx.plan.models import _serving as serving
from torch_neuronx.plan.__main__ import main as plan_main

ZERO_LAUNCH = ("graph_launch_s=0,eager_launch_s=0,collective_launch_s=0,reduction_launch_s=0,host_sync_s=0,"
               "serving_host_step_s=0,hbm_efficiency=1")
INSTANCE, LNC = "trn2.3xlarge", 2
# matmuls of 2048 x 2048 and more (memory-bound at one token); as many KV heads as heads, so the
# cache is read as it is stored (no grouped-query copies)
MEM_BOUND = dict(hidden_size=2048, num_hidden_layers=2, num_attention_heads=16, num_key_value_heads=16,
                 head_dim=128, intermediate_size=8192, vocab_size=8192, tie_word_embeddings=False)
IN, OUT, CACHE = 16, 8, 4096


def _config(**over):
    from transformers import Qwen3Config

    return Qwen3Config(**{**MEM_BOUND, **over})


def _bandwidth() -> float:
    chip = neuron_hardware.INSTANCES[INSTANCE].chip
    return chip.hbm_bytes_per_s / chip.physical_cores * LNC


def _param_count(config) -> int:
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        return sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())


def _roofline_s(config, batch: int, cache_tokens: int = CACHE) -> float:
    """(weights read + KV cache read) / HBM bandwidth, bf16, TP 1."""
    params = _param_count(config) - config.vocab_size * config.hidden_size
    kv = 2 * config.num_hidden_layers * batch * config.num_key_value_heads * config.head_dim * cache_tokens
    return 2 * (params + kv) / _bandwidth()


_PLANNED: dict = {}   # (config, flags, assumptions) -> (report, printed): tests that need the same plan share it


def _plan(tmp_path, config, *argv, name="plan", assumptions=ZERO_LAUNCH):
    """The command line's dry run in a fresh process, launch costs zero: (report, printed report)."""
    key = (config.to_json_string(use_diff=False), argv, assumptions)
    if key in _PLANNED:
        return _PLANNED[key]
    folder = tmp_path / f"{name}-config"
    config.save_pretrained(folder)
    out = tmp_path / f"{name}.json"
    env = dict(os.environ, TORCH_NEURONX_ESTIMATE_ASSUMPTIONS=assumptions)
    for var in ("TORCH_NEURONX_INSTANCE_TYPE", "NEURON_LOGICAL_NC_CONFIG", "TORCH_NEURONX_DRY_RUN"):
        env.pop(var, None)
    p = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "generate", "--config", str(folder),
                        "--instance", INSTANCE, "--lnc", str(LNC), "--input-tokens", str(IN), "--output-tokens",
                        str(OUT), "--buckets", str(IN), "--max-model-len", str(CACHE), "--json", str(out), *argv],
                       env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    _PLANNED[key] = json.loads(out.read_text()), p.stdout
    return _PLANNED[key]


def test_memory_bound_ttft_and_tpot_equal_the_roofline(tmp_path):
    config = _config()
    r, printed = _plan(tmp_path, config)
    assert printed.splitlines()[0].startswith("# generate (mode deployed: compiled CTE and TKG graphs")
    assert "static batch of 1" in printed.splitlines()[0]
    assert (r["mode"], r["serving"], r["dry_run"], r["fits"], r["depth_probes"]) == \
        ("deployed", "static batch", True, True, [2])
    roof = _roofline_s(config, batch=1)
    assert r["tpot_ms"] / 1e3 == pytest.approx(roof, rel=0.10)
    # the prompt fits one 16-token bucket: one CTE step, memory-bound too (16 tokens of activations),
    # attending within the bucket: it reads the 16 positions it writes, not the whole cache
    assert r["prefill_steps"] == 1 and "schedule" not in r["assumptions_serving"]   # no continuous batching
    assert set(r["assumptions_serving"]) == {"host", "sampling", "chunks", "cte_attention"}
    assert r["ttft_ms"] / 1e3 == pytest.approx(_roofline_s(config, batch=1, cache_tokens=IN), rel=0.10)
    cte, tkg = r["graphs"]["context_encoding"], r["graphs"]["token_generation"]
    assert tkg["graph_calls"] == cte["graph_calls"] == 1      # one compiled graph per step, sampling inside
    assert r["memory_breakdown_bytes_per_core"]["kv_cache"] == 2 * 2 * 16 * 128 * CACHE * 2
    # static batch: output tokens/s = tokens / (TTFT + (O - 1) TPOT)
    total = r["ttft_ms"] / 1e3 + (OUT - 1) * r["tpot_ms"] / 1e3
    assert r["output_tokens_per_s"] == pytest.approx(OUT / total)


def test_a_padded_decode_batch_costs_the_compiled_batch_and_the_host_its_share(tmp_path):
    """--decode-batch 4 with one live sequence: every decode step is the 4-sequence graph (weights once,
    4 caches of 4,096 tokens), the tokens are the one sequence's; serving_host_step_s adds to each step."""
    config = _config()
    host = 2e-3
    r, printed = _plan(tmp_path, config, "--decode-batch", "4",
                       assumptions=ZERO_LAUNCH.replace("serving_host_step_s=0", f"serving_host_step_s={host}"))
    tkg = r["graphs"]["token_generation"]
    assert (r["decode_batch"], tkg["batch"], r["graphs"]["context_encoding"]["batch"]) == (4, 4, 1)
    assert tkg["seconds"] == pytest.approx(_roofline_s(config, batch=4), rel=0.10)
    assert "decode_batch" in r["assumptions_serving"] and "batch 4, 1 live, padded" in printed
    assert r["host_step_s"] == host
    # TPOT = t_t(4) + host; TTFT = one CTE step + host; tokens/s counts the one live sequence
    assert r["tpot_ms"] / 1e3 == pytest.approx(tkg["seconds"] + host)
    assert r["ttft_ms"] / 1e3 == pytest.approx(r["graphs"]["context_encoding"]["seconds"] + host)
    total = r["ttft_ms"] / 1e3 + (OUT - 1) * r["tpot_ms"] / 1e3
    assert r["output_tokens_per_s"] == pytest.approx(OUT / total)


def test_an_moe_model_outside_the_kernels_interface_plans_and_says_so(tmp_path):
    """Llama-4's experts module is not transformers' experts interface, so the MoE kernels do not take
    it: the plan still completes, its report says how the experts were planned."""
    from transformers import Llama4TextConfig

    config = Llama4TextConfig(vocab_size=512, hidden_size=128, intermediate_size=64, intermediate_size_mlp=128,
                              num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                              num_local_experts=8, num_experts_per_tok=1, interleave_moe_layer_step=2,
                              tie_word_embeddings=False)
    r, printed = _plan(tmp_path, config)
    assert r["moe"] is True and r["tpot_ms"] > 0
    assert "| MoE experts | planned as the model's Hugging Face code computes them" in printed


def test_concurrency_raises_tpot_and_throughput_as_the_formula_says(tmp_path):
    config = _config()
    n = 4
    chunked = ("--prefill-chunk-size", "8", "--buckets", "8,16")   # two CTE steps of 8 tokens per prompt
    r, printed = _plan(tmp_path, config, "--concurrency", str(n), *chunked)
    assert f"continuous batching, {n} requests in flight" in printed.splitlines()[0]
    assert "| assumption `schedule` | N requests always in flight" in printed
    assert (r["mode"], r["serving"], r["concurrency"]) == ("deployed", "continuous batching", n)
    assert "schedule" in r["assumptions_serving"]
    cte, tkg = r["graphs"]["context_encoding"], r["graphs"]["token_generation"]
    assert (cte["batch"], tkg["batch"]) == (1, n)   # prefill one request at a time, decode all N together
    assert (cte["bucket_tokens"], r["prefill_steps"]) == (8, 2)
    # the decode step of N reads the weights once and N sequences' caches: the roofline again
    assert tkg["seconds"] == pytest.approx(_roofline_s(config, batch=n), rel=0.10)
    one, _ = _plan(tmp_path, config, "--concurrency", "1", *chunked, name="one")
    assert tkg["seconds"] > 1.5 * one["graphs"]["token_generation"]["seconds"]   # 4 caches of 4096 tokens
    # TPOT = t_t + N n_c t_c / (O - 1); tokens/s = O / (n_c t_c + (O - 1) t_t / N); TTFT = the wait,
    # the chunks and one decode step between them
    t_c, t_t = cte["seconds"], tkg["seconds"]
    assert r["tpot_ms"] / 1e3 == pytest.approx(t_t + n * 2 * t_c / (OUT - 1))
    assert r["output_tokens_per_s"] == pytest.approx(OUT / (2 * t_c + (OUT - 1) * t_t / n))
    f = 2 * t_c / (2 * t_c + (OUT - 1) * t_t / n)
    assert r["ttft_ms"] / 1e3 == pytest.approx(f * t_c / 2 + (1 - f) * t_t / 2 + 2 * t_c + t_t)
    # more requests in flight: a slower token for each, more tokens for all
    assert r["tpot_ms"] > one["tpot_ms"] and r["output_tokens_per_s"] > one["output_tokens_per_s"]


def test_depth_extrapolation_equals_the_full_depth_plan(tmp_path):
    config = _config(num_hidden_layers=3)
    probed, _ = _plan(tmp_path, config, name="probed")
    full, _ = _plan(tmp_path, config, "--full-depth", name="full")
    assert probed["depth_probes"] == [1, 2] and full["depth_probes"] == [3]
    for graph in ("context_encoding", "token_generation"):
        for key in ("seconds", "flops", "bytes"):
            assert probed["graphs"][graph][key] == pytest.approx(full["graphs"][graph][key], rel=1e-6), (graph, key)
    assert probed["parameters"] == full["parameters"] == _param_count(config)
    assert probed["memory_breakdown_bytes_per_core"] == full["memory_breakdown_bytes_per_core"]
    assert probed["peak_hbm_bytes_per_core"] == pytest.approx(full["peak_hbm_bytes_per_core"], rel=0.05)
    assert probed["tpot_ms"] / 1e3 == pytest.approx(_roofline_s(config, 1), rel=0.10)


def test_formulas_of_the_two_serving_modes():
    steps = serving.Steps(cte_s=0.040, tkg_s=0.010)
    s = serving.static_batch(steps, batch=2, input_tokens=1000, output_tokens=11, chunk=512)
    assert s["prefill_steps"] == 2 and s["ttft_s"] == pytest.approx(0.080) and s["tpot_s"] == 0.010
    assert s["output_tokens_per_s"] == pytest.approx(2 * 11 / (0.080 + 10 * 0.010))
    one = serving.continuous(steps, 1, 1000, 11, 512)
    four = serving.continuous(steps, 4, 1000, 11, 512)
    # device time per finished request: 2 x 40 ms of prefill + 10 decode steps shared by N
    assert four["requests_per_s"] == pytest.approx(1 / (0.080 + 10 * 0.010 / 4))
    assert four["tpot_s"] == pytest.approx(0.010 + 4 * 0.080 / 10)
    f = 0.080 / (0.080 + 0.025)
    assert four["prefill_share"] == pytest.approx(f)
    assert four["ttft_s"] == pytest.approx(f * 0.040 / 2 + (1 - f) * 0.010 / 2 + 0.080 + 0.010)
    assert four["tpot_s"] > one["tpot_s"] and four["output_tokens_per_s"] > one["output_tokens_per_s"]


@pytest.mark.parametrize("argv, message", [
    (["--concurrency", "0"], "--concurrency must be a positive integer"),
    (["--concurrency", "-3"], "--concurrency must be a positive integer"),
    (["--concurrency", "2", "--batch", "2"], "choose one"),
    (["--output-tokens", "0"], "--output-tokens must be a positive integer"),
    (["--prefill-chunk-size", "0"], "--prefill-chunk-size must be a positive integer"),
    (["--max-model-len", "10"], "--max-model-len 10 is shorter than --input-tokens + --output-tokens = 144"),
    (["--mode", "eager", "--concurrency", "2"], "--concurrency plans the deployed mode"),
    (["--mode", "eager", "--sequence-parallel"], "--sequence-parallel plans the deployed mode"),
    (["--sequence-parallel"], "--sequence-parallel splits the prompt over the TP ranks: it needs --tp 2"),
    (["--decode-batch", "0"], "--decode-batch must be a positive integer"),
    (["--decode-batch", "2", "--concurrency", "4"], "--decode-batch 2 is smaller than the 4 sequences"),
    (["--mode", "eager", "--decode-batch", "4"], "--decode-batch plans the deployed mode"),
])
def test_bad_flags_stop_with_the_reason(argv, message, tiny_config_dir, plan_env, capsys):
    with pytest.raises(SystemExit) as stop:
        plan_main(["generate", "--config", tiny_config_dir, "--instance", INSTANCE, "--real", *argv])
    assert stop.value.code == 2 and message in capsys.readouterr().err


def test_a_prompt_no_bucket_holds_names_the_fix(plan_env):
    from torch_neuronx.plan.models._deployed import pick_bucket

    with pytest.raises(ValueError, match="--prefill-chunk-size"):
        pick_bucket(600, [128, 512])
    assert pick_bucket(129, [128, 512]) == 512


def test_a_fused_step_moves_the_rows_it_writes_and_gathers():
    """A static cache's update (index_copy_) writes the new rows, not the cache; an embedding lookup
    reads the looked-up rows, not the table (estimate/_graphs.py's fused program)."""
    from torch_neuronx.estimate._graphs import estimate_graph
    from torch_neuronx.estimate.hardware import hardware

    class Step(torch.nn.Module):
        def forward(self, cache, pos, new, table, ids, w):
            cache.index_copy_(1, pos, new)                        # kernel 1: the update
            x = torch.nn.functional.embedding(ids, table)         # (fused with it: no matmul between)
            return cache.flatten(0, 1) @ w, x                     # kernel 2: reads the whole cache

    cache, pos, new = torch.zeros(4, 1024, 64), torch.tensor([7]), torch.ones(4, 1, 64)
    table, ids, w = torch.ones(50000, 64), torch.tensor([3]), torch.ones(64, 64)
    g = estimate_graph(torch.fx.symbolic_trace(Step()), [cache, pos, new, table, ids, w],
                       hardware(INSTANCE, LNC), backward=False)["forward"]
    nbytes = lambda *ts: sum(t.numel() * t.element_size() for t in ts)   # noqa: E731
    update = nbytes(pos, new) + nbytes(pos, new)          # reads index and rows, writes the rows
    gather = nbytes(ids) + 64 * 4 + 64 * 4                # reads index and one row, writes one row
    matmul = nbytes(cache, w) + 4 * 1024 * 64 * 4         # whole cache and weight in, result out
    assert g.bytes == update + gather + matmul


def test_tp_beyond_the_kv_heads_replicates_them_in_the_static_cache(tmp_path):
    """TP 4 over 2 KV heads (as NxD Inference runs TP 64 over Llama-3's 8): each rank holds one KV
    head, so its static cache holds one head of every layer, and the decode step reads it."""
    config = _config(num_key_value_heads=2, num_attention_heads=16, hidden_size=2048)
    r, _ = _plan(tmp_path, config, "--tp", "4", name="tp4")
    assert r["fits"] and r["kv_head_copies"] == 2 and r["kv_heads_per_rank"] == 1
    assert r["memory_breakdown_bytes_per_core"]["kv_cache"] == 2 * 2 * 1 * 128 * CACHE * 2   # K and V, layers, 1 head


def test_tp_that_does_not_divide_the_heads_plans_the_padded_program(tmp_path):
    """TP 4 over 14 heads and 8,190 tokens (as NxD Inference runs Llama-2-13B's 40 heads and
    CodeLlama's 32,016 tokens at TP 32): the heads are padded to 16 with zero heads (in a multi-head
    model the KV heads with them) and the vocabulary to 8,192. The padded program is a 16-head model
    of the same head size and an 8,192-token vocabulary: it takes the same time and cache; the
    parameter count stays the real model's."""
    fourteen = _config(num_attention_heads=14, num_key_value_heads=14, vocab_size=8190)
    sixteen = _config()   # 16 heads, 8,192 tokens (the same plan as the sequence-parallel test's TP plan)
    padded, text = _plan(tmp_path, fourteen, "--tp", "4", "--html", str(tmp_path / "fourteen.html"), name="fourteen")
    same, _ = _plan(tmp_path, sixteen, "--tp", "4", name="tp")
    assert padded["attention_heads_padded"] == {"heads": 14, "padded_to": 16, "kv_heads": 14, "kv_padded_to": 16}
    assert padded["vocab_padded"] == {"vocab_size": 8190, "padded_to": 8192}
    assert "14 padded to 16" in text and "8190 padded to 8192" in text
    page = (tmp_path / "fourteen.html").read_text()   # the HTML page says it too, beside the layout
    assert "<td>attention heads</td><td>14 padded to 16" in page and "<td>vocabulary</td><td>8190 padded to 8192" in page
    assert padded["parameters"] == _param_count(fourteen)
    assert padded["memory_breakdown_bytes_per_core"]["kv_cache"] == same["memory_breakdown_bytes_per_core"]["kv_cache"]
    for key in ("ttft_ms", "tpot_ms"):
        assert padded[key] == pytest.approx(same[key], rel=0.01), key
    # training does not pad: the same layout stops with the TP sizes that work
    p = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "train", "--config", str(tmp_path / "fourteen-config"),
                        "--instance", INSTANCE, "--lnc", str(LNC), "--tp", "4", "--seq-len", "16"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 2 and "--tp 4 does not divide the model's num_attention_heads=14" in p.stderr


def test_sequence_parallel_context_encoding(tmp_path):
    """--sequence-parallel (NxD Inference's sequence_parallel_enabled): the CTE's all-reduces become a
    reduce-scatter and an all-gather of the same bytes, its matmul FLOPs are unchanged and its
    norms and residuals run on 1/TP of the prompt, so the graph is cheaper; the decode step is the
    tensor-parallel one."""
    config = _config()
    tp, sp = (_plan(tmp_path, config, "--tp", "4", *flags, name=name)[0]
              for name, flags in (("tp", ()), ("sp", ("--sequence-parallel",))))
    assert sp["sequence_parallel"] is True and tp["sequence_parallel"] is False
    plain, split = tp["graphs"]["context_encoding"], sp["graphs"]["context_encoding"]
    assert "all_reduce" not in split["collectives"]
    assert split["collectives"]["reduce_scatter"]["count"] == plain["collectives"]["all_reduce"]["count"]
    assert split["collectives"]["reduce_scatter"]["bytes"] == plain["collectives"]["all_reduce"]["bytes"]
    assert split["flops"] == pytest.approx(plain["flops"], rel=0.01)
    assert split["time_breakdown_s"]["graph"] < plain["time_breakdown_s"]["graph"]
    assert sp["graphs"]["token_generation"] == tp["graphs"]["token_generation"]


def test_a_tp_plan_that_gathers_the_heads_keeps_them_all_in_each_ranks_cache(tmp_path):
    """Phi-3's TP plan gathers its fused qkv_proj's output (transformers' "colwise_gather_output"), so
    every rank computes and caches all KV heads; the sequence-parallel plan does not cover it, and
    the report says so instead of planning something else."""
    from transformers import Phi3Config

    config = Phi3Config(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=4, vocab_size=512, pad_token_id=0, eos_token_id=1, bos_token_id=1)
    r, text = _plan(tmp_path, config, "--tp", "2", "--sequence-parallel", name="phi3")
    assert r["fits"] and r["sequence_parallel"] is False and "not a Llama-style decoder" in text
    assert r["kv_heads_per_rank"] == 4
    head_dim = 256 // 4
    assert r["memory_breakdown_bytes_per_core"]["kv_cache"] == 2 * 2 * 4 * head_dim * CACHE * 2   # K, V; layers; all heads


def test_a_deep_model_at_batch_1_plans_after_its_full_depth_model_is_freed(tmp_path):
    """The deployed plan allocates the full-depth model, frees it, then compiles 1- and 2-layer
    probes. Freed, a model of 32 layers is cyclic garbage until the collector runs; collected during
    a probe's compile, its modules left the dry run's weak registries between Dynamo's trace and
    the call, and the compiled step failed (IndexError / KeyError 'bias': Llama-2-7B at TP 32)."""
    from transformers import LlamaConfig

    folder = tmp_path / "deep"
    LlamaConfig(hidden_size=256, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32,
                intermediate_size=512, vocab_size=512, tie_word_embeddings=False).save_pretrained(folder)
    out = tmp_path / "deep.json"
    env = {k: v for k, v in os.environ.items()
           if k not in ("TORCH_NEURONX_INSTANCE_TYPE", "NEURON_LOGICAL_NC_CONFIG", "TORCH_NEURONX_DRY_RUN")}
    p = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "generate", "--config", str(folder),
                        "--instance", "trn1.32xlarge", "--tp", "32", "--batch", "1", "--input-tokens", "128",
                        "--output-tokens", "3", "--quiet", "--json", str(out)],
                       env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    r = json.loads(out.read_text())
    assert r["depth_probes"] == [1, 2] and r["ttft_ms"] > 0 and r["tpot_ms"] > 0
