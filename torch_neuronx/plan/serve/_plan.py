"""`plan serve`: a deployment's requests through vLLM's engine on the simulated clock, as a report.

Order: vLLM's config first (its own checks of the flags: TP against the heads, max-model-len against
the config), then the requests against max-model-len, then the model on phantom memory (weights per
core), the prefill graph at max-num-batched-tokens (vLLM's profiling step: its transient memory is
not the KV cache's), the KV cache vLLM sizes from what is left (its own error when one request of
max-model-len does not fit), and the run.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import _progress as progress, _report_ranges as report_ranges
from . import _compile as deployment_compile, _engine as engine, _metrics as metrics, _prices as prices, _ranges as serve_ranges, _setup as setup
from ._workload import RequestSpec, WorkloadError

# the assumptions the plan rests on, named in its report (docs/serving.md gives their sources)
ASSUMPTIONS = {
    "scheduler": "vLLM's own Scheduler and EngineCore (the classes `vllm serve` runs) decide every step: "
                 "admission, max-num-seqs, the token budget, chunked prefill, preemption",
    "defaults": "unset --max-num-seqs and --max-num-batched-tokens take vLLM's server defaults for an accelerator "
                "under 70 GiB, as a logical NeuronCore is (256 and 2048: vllm/engine/arg_utils.py get_batch_defaults), "
                "not those of the planning host's platform",
    "step": "a step runs one prefill graph for all its prompt tokens (padded to the smallest "
            "num_batched_tokens bucket) and one decode graph for its decoding sequences (padded to the smallest "
            "num_seqs bucket), back to back; vLLM Neuron's defaults for both bucket lists (powers of two up to "
            "max-num-batched-tokens and max-num-seqs: vllm-neuron docs, reference configuration)",
    "graph_prices": "each bucket's graph costs what plan generate's deployed mode estimates for it (compiled step, "
                    "1- and 2-layer probes extrapolated to the depth); a prefill segment attends within its "
                    "bucket, a decode step over caches of max-model-len (vllm-neuron docs, decode context-length "
                    "bucketing)",
    "host": "each engine step adds the host's share of a serving step, the cost-model assumption "
            "serving_host_step_s (vLLM Neuron's measured synchronous host overhead per execution, "
            "docs/hardware-sources.md C4; plan generate's deployed mode adds the same): the engine schedules "
            "step k+1 after step k's tokens are back",
    "clients": "requests arrive as vllm bench serve sends them (Poisson or gamma gaps at --request-rate, seeded; "
               "--max-concurrency slots), prompts of random tokens (no prefix-cache hits), EOS ignored",
}


@dataclass(frozen=True)
class EngineSettings:
    """vLLM's serving flags (None: vLLM's default for a server)."""
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    block_size: int | None = None
    gpu_memory_utilization: float | None = None


def check_lengths(specs: list[RequestSpec], max_model_len: int) -> None:
    """Every request must fit max-model-len with its output, as the static decode graph holds it."""
    longest = max(specs, key=lambda s: s.input_tokens + s.output_tokens)
    if longest.input_tokens + longest.output_tokens > max_model_len:
        raise WorkloadError(f"a request of {longest.input_tokens} input + {longest.output_tokens} output tokens is "
                            f"longer than --max-model-len {max_model_len}; raise --max-model-len or shorten "
                            f"--input-tokens / --output-tokens (or the --dataset rows)")


def simulate(vllm_config, target: engine.Target, executor, specs, due, *, max_concurrency, host_s, vocab_size,
             seed: int = 0) -> dict:
    """Build vLLM's engine core on `target` and run the requests: bench serve's result fields and
    what the engine did."""
    progress.stage("building vLLM's engine core (KV cache, scheduler)")
    core = setup.engine_core(vllm_config, executor)
    blocks = vllm_config.cache_config.num_gpu_blocks
    progress.stage("serving the requests on the simulated clock", total=len(specs), unit="request")
    served = engine.run(core, target.clock, specs, due, max_concurrency=max_concurrency, host_s=host_s,
                        vocab_size=vocab_size, seed=seed)
    clock = target.clock
    result = metrics.bench_serve_result(served, max(r.end for r in served))
    usage = clock.kv_usage or [0.0]
    engine_figures = {
        "steps": clock.steps, "device_s": clock.device_s, "host_s": clock.host_s, "host_s_per_step": host_s,
        "preemptions": clock.preemptions, "kv_cache_blocks": blocks, "block_size": vllm_config.cache_config.block_size,
        "kv_cache_tokens": blocks * vllm_config.cache_config.block_size,
        "kv_cache_usage_peak": max(usage), "kv_cache_usage_mean": sum(usage) / len(usage),
        "max_model_len": vllm_config.model_config.max_model_len,
        "max_num_seqs": vllm_config.scheduler_config.max_num_seqs,
        "max_num_batched_tokens": vllm_config.scheduler_config.max_num_batched_tokens,
        "enable_chunked_prefill": vllm_config.scheduler_config.enable_chunked_prefill,
        "enable_prefix_caching": vllm_config.cache_config.enable_prefix_caching,
        "gpu_memory_utilization": vllm_config.cache_config.gpu_memory_utilization,
    }
    graphs = [{"kind": kind, "bucket": bucket, "calls": clock.graph_calls.get((kind, bucket), 0),
               "seconds": target.prices.priced[(kind, bucket)]["seconds"],
               "flops": target.prices.priced[(kind, bucket)].get("flops")}
              for kind, bucket in sorted(target.prices.priced)]
    return {"bench_serve": result, "engine": engine_figures, "graphs": graphs,
            "buckets": {"prefill_tokens": target.prices.buckets["cte"], "decode_sequences": target.prices.buckets["tkg"]}}


def plan_serve(config, layout, folder: str, *, dtype: str, settings: EngineSettings, specs: list[RequestSpec],
               due: list[float], max_concurrency: int | None, seed: int, routing=None) -> dict:
    """Plan serving `specs` (due at `due`) on one TP group of `layout`: the report's figures."""
    import torch

    from ...estimate import assumptions as cost_assumptions
    from ..models._build import parameter_count

    target = engine.Target()
    executor = engine.simulated_executor(target)
    progress.stage("configuring vLLM's engine (vllm.engine.arg_utils.EngineArgs)")
    vc = setup.vllm_config(folder, executor, dtype=dtype, tp=layout.tp, max_model_len=settings.max_model_len,
                           max_num_seqs=settings.max_num_seqs, max_num_batched_tokens=settings.max_num_batched_tokens,
                           block_size=settings.block_size, gpu_memory_utilization=settings.gpu_memory_utilization,
                           enable_prefix_caching=None, enable_chunked_prefill=None)
    max_len = vc.model_config.max_model_len
    check_lengths(specs, max_len)
    probe = prices.ModelProbe(config, layout, getattr(torch, dtype), max_len, routing)
    progress.stage("allocating the model at full depth (phantom memory)")
    held = probe.held()
    base = held["base"]
    if not base["fits"]:
        raise MemoryError(f"the model's weights do not fit one core at TP {layout.tp}: {base['oom']}; raise --tp")
    step_prices = prices.StepPrices(prices.prefill_buckets(vc.scheduler_config.max_num_batched_tokens),
                                    prices.decode_buckets(vc.scheduler_config.max_num_seqs), probe)
    progress.stage("pricing the prefill graph at max-num-batched-tokens (vLLM's profiling step)")
    _, profile = step_prices.graph("cte", vc.scheduler_config.max_num_batched_tokens)
    capacity = base["hbm_capacity_bytes_per_core"]
    share = int(capacity * vc.cache_config.gpu_memory_utilization)
    available = share - held["held"] - profile["step_transient_bytes"]
    if available <= 0:
        raise MemoryError(f"--gpu-memory-utilization {vc.cache_config.gpu_memory_utilization}: the model "
                          f"({held['held'] / 2**30:.2f} GiB per core) and one prefill step at max-num-batched-tokens "
                          f"({profile['step_transient_bytes'] / 2**30:.2f} GiB) fill the share "
                          f"({share / 2**30:.2f} GiB of {capacity / 2**30:.2f} GiB) before any KV cache; raise "
                          f"--gpu-memory-utilization or --tp, or lower --max-num-batched-tokens")
    text = probe.config.get_text_config() if hasattr(probe.config, "get_text_config") else probe.config
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    target.prices, target.available_bytes = step_prices, available
    target.kv_specs = setup.attention_specs(text.num_hidden_layers, base["kv_heads_per_rank"], head_dim)
    host_s = cost_assumptions.resolve().serving_host_step_s
    out = simulate(vc, target, executor, specs, due, max_concurrency=max_concurrency, host_s=host_s,
                   vocab_size=text.vocab_size, seed=seed)
    ranges = serve_ranges.kind_ranges(config.to_dict() if hasattr(config, "to_dict") else dict(config),
                                      report_ranges.table())
    ends = {}
    for end in ("fast", "slow") if ranges else ():   # the same requests at each end of the calibrated ranges
        progress.stage(f"the same requests with every graph at the {end} end of its calibrated range")
        target.prices, target.clock = prices.ScaledPrices(step_prices, serve_ranges.factors(ranges, end)), engine.Clock()
        ends[end] = simulate(vc, target, executor, specs, due, max_concurrency=max_concurrency, host_s=host_s,
                             vocab_size=text.vocab_size, seed=seed)["bench_serve"]
    kv_bytes = out["engine"]["kv_cache_blocks"] * sum(
        s.page_size_bytes for s in target.kv_specs(vc).values()) if out["engine"]["kv_cache_blocks"] else 0
    report = dict(base)
    report["memory_breakdown_bytes_per_core"] = {**base["memory_breakdown_bytes_per_core"], "kv_cache": kv_bytes}
    peak = held["held"] + profile["step_transient_bytes"] + kv_bytes
    report.update(peak_hbm_bytes_per_core=peak, headroom_bytes_per_core=capacity - peak, fits=peak <= capacity)
    report["parameters"] = parameter_count(config)   # the real model's, not the TP-padded one's
    report.update(out)
    report["assumptions_serving"] = dict(ASSUMPTIONS)
    report["compile_deployment"] = deployment_compile.budget(step_prices.buckets, step_prices.priced)
    if ends:
        serve_ranges.attach(report, ranges, ends["fast"], ends["slow"], report_ranges.table()["coverage_goal"])
    report["replicas"] = layout.world_size // layout.tp
    return report
