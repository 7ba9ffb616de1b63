"""`plan serve`: vLLM's own scheduler and engine core on a simulated clock.

With step prices set by hand, the figures are checked against queues computed by hand (one slot: the
TTFT of request i is i service times plus its prefill; a batch; the client's concurrency cap;
preemption when the KV cache is short). Then the command itself on Llama-3.1-8B's public dimensions
at TP 4 on trn2.3xlarge, and its bad-input messages."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.vllm

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 1000, "hidden_size": 128,
        "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 32, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
LLAMA_3_1_8B = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 128256,
                "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
                "num_key_value_heads": 8, "max_position_embeddings": 131072, "rms_norm_eps": 1e-5,
                "rope_theta": 500000.0, "tie_word_embeddings": False}


def _folder(tmp_path, config: dict, name: str = "model") -> str:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def _hand_priced(folder: str, *, prefill_s, decode_s, available_bytes: int = 1 << 30, **settings):
    """vLLM's config and a target whose graphs cost what `prefill_s(bucket)` / `decode_s(bucket)` say."""
    from torch_neuronx.plan.serve import _engine as engine, _prices as prices, _setup as setup

    target = engine.Target()
    executor = engine.simulated_executor(target)
    defaults = dict(max_model_len=1024, max_num_seqs=1, max_num_batched_tokens=None, block_size=None,
                    gpu_memory_utilization=None, enable_prefix_caching=None, enable_chunked_prefill=None)
    vc = setup.vllm_config(folder, executor, dtype="bfloat16", tp=1, **{**defaults, **settings})
    price = lambda kind, bucket: {"seconds": prefill_s(bucket) if kind == "cte" else decode_s(bucket)}
    target.prices = prices.StepPrices(prices.prefill_buckets(vc.scheduler_config.max_num_batched_tokens),
                                      prices.decode_buckets(vc.scheduler_config.max_num_seqs), price)
    target.kv_specs = setup.attention_specs(TINY["num_hidden_layers"], TINY["num_key_value_heads"], TINY["head_dim"])
    target.available_bytes = available_bytes
    return vc, target, executor


def _serve(vc, target, executor, specs, due=None, *, max_concurrency=None, host_s=0.0):
    from torch_neuronx.plan.serve import _plan as plan

    return plan.simulate(vc, target, executor, specs, due or [0.0] * len(specs), max_concurrency=max_concurrency,
                         host_s=host_s, vocab_size=TINY["vocab_size"])


def test_one_slot_queues_requests_one_service_time_apart(tmp_path):
    """max-num-seqs 1, all requests at once: request i waits for i whole requests, each a prefill step
    and O-1 decode steps, every step plus the host time."""
    from torch_neuronx.plan.serve._workload import uniform

    cte, tkg, host, n, o = 0.050, 0.004, 0.001, 5, 10
    vc, target, ex = _hand_priced(_folder(tmp_path, TINY), prefill_s=lambda b: cte, decode_s=lambda b: tkg)
    out = _serve(vc, target, ex, uniform(n, 100, o), host_s=host)
    service = cte + host + (o - 1) * (tkg + host)
    ttfts = [i * service + cte + host for i in range(n)]
    b = out["bench_serve"]
    assert b["completed"] == n and b["total_output_tokens"] == n * o
    assert b["mean_ttft_ms"] == pytest.approx(1e3 * sum(ttfts) / n)
    assert b["p99_ttft_ms"] == pytest.approx(1e3 * (ttfts[-2] + 0.96 * (ttfts[-1] - ttfts[-2])))   # numpy's linear
    assert b["mean_tpot_ms"] == pytest.approx(1e3 * (tkg + host))
    assert b["mean_itl_ms"] == pytest.approx(1e3 * (tkg + host))
    assert b["mean_e2el_ms"] == pytest.approx(1e3 * sum((i + 1) * service for i in range(n)) / n)
    assert b["duration"] == pytest.approx(n * service)
    assert b["request_throughput"] == pytest.approx(1 / service)
    assert b["output_throughput"] == pytest.approx(o / service)
    e = out["engine"]
    assert e["steps"] == n * o and e["preemptions"] == 0 and e["max_num_seqs"] == 1
    assert e["device_s"] == pytest.approx(n * (cte + (o - 1) * tkg)) and e["host_s"] == pytest.approx(n * o * host)
    calls = {(g["kind"], g["bucket"]): g["calls"] for g in out["graphs"]}
    assert calls == {("cte", 128): n, ("tkg", 1): n * (o - 1)}   # 100 prompt tokens padded to the 128 bucket


def test_a_batch_prefills_together_then_decodes_at_the_padded_batch_bucket(tmp_path):
    """Three requests, room for four: one step prefills all three prompts (300 tokens, the 512 bucket),
    then every decode step runs the batch-4 graph (three sequences padded to the bucket)."""
    from torch_neuronx.plan.serve._workload import uniform

    vc, target, ex = _hand_priced(_folder(tmp_path, TINY), prefill_s=lambda b: b * 1e-4, decode_s=lambda b: b * 1e-3,
                                  max_num_seqs=4)
    o = 6
    out = _serve(vc, target, ex, uniform(3, 100, o))
    b = out["bench_serve"]
    assert target.prices.buckets == {"cte": [128, 256, 512, 1024, 2048], "tkg": [1, 2, 4]}
    assert b["median_ttft_ms"] == pytest.approx(512 * 1e-4 * 1e3) and b["std_ttft_ms"] == pytest.approx(0, abs=1e-9)
    assert b["mean_tpot_ms"] == pytest.approx(4e-3 * 1e3)
    assert b["duration"] == pytest.approx(512e-4 + (o - 1) * 4e-3)
    assert {(g["kind"], g["bucket"]): g["calls"] for g in out["graphs"]} == {("cte", 512): 1, ("tkg", 4): o - 1}


def test_client_concurrency_cap_sends_the_next_request_when_one_finishes(tmp_path):
    """--max-concurrency 1 with engine room for four: bench serve's client sends one request at a time,
    so none queues in the engine and every TTFT is one prefill step; the run lasts n requests."""
    from torch_neuronx.plan.serve._workload import uniform

    cte, tkg, n, o = 0.020, 0.002, 4, 5
    vc, target, ex = _hand_priced(_folder(tmp_path, TINY), prefill_s=lambda b: cte, decode_s=lambda b: tkg,
                                  max_num_seqs=4)
    b = _serve(vc, target, ex, uniform(n, 100, o), max_concurrency=1)["bench_serve"]
    assert b["mean_ttft_ms"] == pytest.approx(cte * 1e3) and b["p99_ttft_ms"] == pytest.approx(cte * 1e3)
    assert b["duration"] == pytest.approx(n * (cte + (o - 1) * tkg))


def test_spaced_arrivals_wait_for_nothing(tmp_path):
    """Requests due 1 s apart (far longer than one request): each starts on arrival, TTFT = one
    prefill step, and the run ends with the last request."""
    from torch_neuronx.plan.serve._workload import uniform

    cte, tkg, o = 0.010, 0.001, 4
    vc, target, ex = _hand_priced(_folder(tmp_path, TINY), prefill_s=lambda b: cte, decode_s=lambda b: tkg)
    due = [1.0, 2.0, 3.0]
    b = _serve(vc, target, ex, uniform(3, 100, o), due)["bench_serve"]
    assert b["mean_ttft_ms"] == pytest.approx(cte * 1e3) and b["std_ttft_ms"] == pytest.approx(0, abs=1e-9)
    assert b["duration"] == pytest.approx(3.0 + cte + (o - 1) * tkg)


def test_arrivals_follow_bench_serve(tmp_path):
    """Poisson at rate R: gaps from numpy's gamma(1, 1/R) seeded as bench serve seeds it, scaled so
    the last request is due at n / R; an infinite rate sends everything at once."""
    import numpy as np

    from torch_neuronx.plan.serve._workload import arrival_times

    rng = np.random.RandomState(7)
    gaps = [rng.gamma(shape=1.0, scale=1 / 4.0) for _ in range(50)]
    expected = np.cumsum(gaps) * (50 / 4.0) / sum(gaps)
    assert arrival_times(50, 4.0, seed=7) == pytest.approx(list(expected))
    assert arrival_times(5, float("inf")) == [0.0] * 5


def test_short_kv_cache_preempts_and_still_completes(tmp_path):
    """A KV cache of 9 blocks of 128 tokens (one request at max-model-len needs 8) and four requests of
    10 + 500 tokens: all four start in one block each and need four at the end, so vLLM's scheduler
    preempts (and recomputes the preempted ones' prompt and outputs), and every request completes."""
    from torch_neuronx.plan.serve._workload import uniform

    block = 128 * 2 * TINY["num_key_value_heads"] * TINY["head_dim"] * 2 * TINY["num_hidden_layers"]  # K and V, bf16
    vc, target, ex = _hand_priced(_folder(tmp_path, TINY), prefill_s=lambda b: 0.01, decode_s=lambda b: 0.001,
                                  max_num_seqs=4, available_bytes=9 * block)
    out = _serve(vc, target, ex, uniform(4, 10, 500))
    assert out["engine"]["kv_cache_blocks"] == 9
    assert out["engine"]["preemptions"] > 0
    assert out["bench_serve"]["completed"] == 4 and out["bench_serve"]["total_output_tokens"] == 2000
    assert out["engine"]["kv_cache_usage_peak"] == 1.0
    recomputed = [g for g in out["graphs"] if g["kind"] == "cte" and g["bucket"] > 128]
    assert recomputed and all(g["calls"] for g in recomputed)   # a resumed request prefills its outputs too


def test_kv_cache_too_small_for_max_model_len_is_vllms_error(tmp_path):
    from torch_neuronx.plan.serve._workload import uniform

    vc, target, ex = _hand_priced(_folder(tmp_path, TINY), prefill_s=lambda b: 0.01, decode_s=lambda b: 0.001,
                                  available_bytes=3 * 128 * 2 * 2 * 32 * 2 * 2)   # 3 blocks of 128 tokens
    with pytest.raises(ValueError, match="max_model_len"):
        _serve(vc, target, ex, uniform(1, 10, 10))


def test_heads_tp_does_not_divide_is_vllms_error(tmp_path):
    from torch_neuronx.plan.serve import _engine as engine, _setup as setup

    odd = {**TINY, "num_attention_heads": 6, "num_key_value_heads": 6, "hidden_size": 192}
    with pytest.raises(ValueError, match="divisible by tensor parallel size"):
        setup.vllm_config(_folder(tmp_path, odd), engine.simulated_executor(engine.Target()), dtype="bfloat16", tp=4,
                          max_model_len=512, max_num_seqs=None, max_num_batched_tokens=None, block_size=None,
                          gpu_memory_utilization=None, enable_prefix_caching=None, enable_chunked_prefill=None)


def test_request_longer_than_max_model_len_names_the_flags():
    from torch_neuronx.plan.serve._plan import check_lengths
    from torch_neuronx.plan.serve._workload import RequestSpec, WorkloadError

    with pytest.raises(WorkloadError, match=r"--max-model-len 256.*--input-tokens / --output-tokens"):
        check_lengths([RequestSpec(100, 50), RequestSpec(200, 100)], 256)


def _plan(*args, timeout=600):
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "serve", *args, "-q"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_unknown_model_type_names_config(tmp_path):
    folder = _folder(tmp_path, {**TINY, "model_type": "no-such-model"})
    done = _plan("--config", folder, "--instance", "trn2.3xlarge", "--tp", "2")
    assert done.returncode == 2
    assert "--config" in done.stderr and "no-such-model" in done.stderr


def test_tp_larger_than_the_instance_names_tp(tmp_path):
    done = _plan("--config", _folder(tmp_path, TINY), "--instance", "trn2.3xlarge", "--tp", "8")
    assert done.returncode == 2 and "trn2.3xlarge" in done.stderr and "TP" in done.stderr


def test_llama_3_1_8b_at_tp4_on_trn2_3xlarge(tmp_path):
    """The full-size model on phantom memory: weights per core as TP 4 shards them, vLLM's KV cache
    in what is left, four requests served, and figures consistent with the graphs priced."""
    out = tmp_path / "plan.json"
    done = _plan("--config", _folder(tmp_path, LLAMA_3_1_8B), "--instance", "trn2.3xlarge", "--tp", "4",
                 "--max-num-seqs", "4", "--max-model-len", "256", "--max-num-batched-tokens", "256",
                 "--num-prompts", "4", "--input-tokens", "64", "--output-tokens", "8", "--json", str(out),
                 "--html", str(tmp_path / "plan.html"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| TTFT ms: mean / p50 / p90 / p99 |" in done.stdout and "INFO" not in done.stdout
    page = (tmp_path / "plan.html").read_text()
    assert "plan serve: llama on" in page and "Latency in ms (vllm bench serve" in page
    r = json.loads(out.read_text())
    assert r["dry_run"] and r["fits"] and r["parameters"] == 8_030_261_248 and r["kv_heads_per_rank"] == 2
    # bf16 weights: a quarter of the model per core, but the whole embedding (transformers' TP plan for
    # Llama keeps it on every rank)
    embedding = 128256 * 4096
    per_core = 2 * ((8_030_261_248 - embedding) / 4 + embedding)
    assert r["memory_breakdown_bytes_per_core"]["parameters"] == pytest.approx(per_core, rel=0.001)
    b, e = r["bench_serve"], r["engine"]
    assert b["completed"] == 4 and b["total_output_tokens"] == 32 and b["failed"] == 0
    # KV cache: blocks x 128 tokens x 32 layers x (K + V) x 2 heads x 128 x 2 bytes, within vLLM's memory share
    per_block = 128 * 32 * 2 * 2 * 128 * 2
    assert r["memory_breakdown_bytes_per_core"]["kv_cache"] == e["kv_cache_blocks"] * per_block
    assert r["peak_hbm_bytes_per_core"] <= e["gpu_memory_utilization"] * r["hbm_capacity_bytes_per_core"] + 1
    graphs = {(g["kind"], g["bucket"]): g for g in r["graphs"]}
    decode = min(g["seconds"] for (kind, _), g in graphs.items() if kind == "tkg" and g["calls"])
    assert b["mean_tpot_ms"] >= 1e3 * (decode + e["host_s_per_step"]) * 0.999
    assert e["device_s"] == pytest.approx(sum(g["seconds"] * g["calls"] for g in r["graphs"]))
    assert b["duration"] == pytest.approx(e["device_s"] + e["host_s"])   # all sent at once: never idle
    assert set(r["assumptions_serving"]) >= {"scheduler", "defaults", "step", "graph_prices", "host", "clients"}
    # the four prompts fill one 256-token prefill step, then four sequences decode together: two graphs
    assert {k: g["calls"] for k, g in graphs.items()} == {("cte", 256): 1, ("tkg", 4): 7}
    assert b["std_ttft_ms"] == pytest.approx(0, abs=1e-6) and e["steps"] == 8
    # the calibrated range: the same four requests again with every graph at each end of its kind's range
    # (residuals are log(planned / actual)); the host's time per step is not scaled
    ranges = r["ranges"]
    assert ranges["prefill"]["kind"] == "dense/prefill/nxd-inference" and ranges["decode"]["kind"] == "dense/decode/nxd-inference"
    cte, tkg, host = graphs[("cte", 256)]["seconds"], graphs[("tkg", 4)]["seconds"], e["host_s_per_step"]
    assert b["mean_ttft_ms"] == pytest.approx(1e3 * (cte + host))
    for key, graph, phase in (("mean_ttft_ms", cte, "prefill"), ("mean_tpot_ms", tkg, "decode")):
        ends = sorted(1e3 * (graph * math.exp(-ranges[phase][f"residual_{end}"]) + host) for end in ("low", "high"))
        assert b[f"{key}_range"] == pytest.approx(ends), key
    assert b["output_throughput_range"][0] < b["output_throughput_range"][1]
    assert "(80% range of the mean" in done.stdout and "80% ranges from the calibration table" in done.stdout
    assert 'id="ranges"' in page
    # what the deployment compiles: every bucket, each graph priced by the public compile-time fit
    from torch_neuronx.plan import _compile_time as compile_time

    c, fit = r["compile_deployment"], compile_time.fit()
    assert [(g["kind"], g["bucket"]) for g in c["graphs"]] == \
        [("cte", 128), ("cte", 256), ("tkg", 1), ("tkg", 2), ("tkg", 4)]
    for g in c["graphs"]:
        if g["flops_from"] == "priced":
            assert g["flops_per_core"] == graphs[(g["kind"], g["bucket"])]["flops"]
        if "estimate_s" in g:
            assert g["estimate_s"] == pytest.approx(10 ** fit.a * g["flops_per_core"] ** fit.b)
    assert c["total_s"] == pytest.approx(sum(g.get("estimate_s", 0) for g in c["graphs"]))
    assert "neuronx-cc compile time" in done.stdout and 'id="compile"' in page
