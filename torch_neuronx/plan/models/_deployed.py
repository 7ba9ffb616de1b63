"""`plan generate` as a Trainium deployment runs it: compiled CTE and TKG graphs, static KV cache,
sampling on the device.

NxD Inference and vLLM-Neuron compile a context-encoding graph (CTE) per prompt-length bucket
and a token-generation graph (TKG) per batch size, over a KV cache allocated once for the
longest sequence, with the sampler inside the graph so only the token ids leave the device.
This plan builds the Hugging Face model from its config (the same `from_pretrained` path and
TP sharding as the other plans), allocates a `StaticCache` of `max_model_len`, compiles one step
function with the neuron backend (the model's forward with the static cache, then the greedy
token: `argmax` of the last position, on the device) and runs it once at the CTE shape (one
bucket, the prefill batch) and once at the TKG shape (one token per sequence of the decode
batch). Each step's estimated time is everything the estimate records during that call: its
graph (fused, one launch) and the TP collectives. _serving.py composes the two into TTFT, TPOT
and throughput.

Layouts of NxD Inference (docs/hardware-sources.md, F): heads or a vocabulary that TP does not
divide are padded to a multiple of TP (`_build.padded_for_tp`; the padding is computed and
stored, the reported parameter count is the real model's), and `sequence_parallel` builds the
CTE's model sequence-parallel (`_sequence_parallel.py`; the TKG keeps the tensor-parallel model,
one token per sequence cannot be split), so the CTE is probed on its own build. With `layout.ep`
(`--ep`, vLLM-Neuron's ep_degree) the MoE layers' experts are split within the TP group, the same
layout for both graphs (_moe_kernel.shard_experts; docs/moe.md).

Depth: a compiled plan's cost is mostly compiling (Dynamo, AOTAutograd and Inductor per layer).
Decoder layers of one kind are the same program, so a step's time, FLOPs and bytes are linear in
the number of layers: the plan compiles the model at 1 and 2 layers (the same width, TP and cache)
and extrapolates them to the config's depth (`depth_probes` in the report). Memory is not
extrapolated: the full-depth model and its static cache are allocated first (a model that does not
fit stops with the allocator's message), and the deeper probe's step transient is added to what
they hold. Configs whose layers differ (`layer_types` of several kinds, MoE configs with dense
layers) and `full_depth=True` plan the whole depth instead. tests/plan/test_generate_deployed.py
checks the extrapolation against a full-depth plan.
"""
from __future__ import annotations

import contextlib
import copy
import gc
import math

import torch

from ...estimate import assumptions as assumptions_mod
from . import _moe_kernel as moe_kernel, _serving as serving
from ._build import build_causal_lm, local_bytes, padded_for_tp, padding_fields, parameter_count
from ._layout import Layout, check_model, serving_expert_parallel, tp_shards_kv_heads
from ._measure import Region
from ._report import base_report
from ._routing import Routing, parse as parse_routing
from ._world import fake_world

MIN_BUCKET = 128   # the smallest automatic context-encoding bucket (NxD Inference's generate_buckets(128, ...))


def default_buckets(max_model_len: int) -> list[int]:
    """NxD Inference's automatic context-encoding buckets (its modules/autobucketing.py
    `generate_buckets(128, max_length)`, serving.BUCKETS): powers of two from 128 below
    2^round(log2(max length)), then the max length itself, so the last bucket and the static
    cache end where the deployment's max length does."""
    if max_model_len <= MIN_BUCKET:
        return [max_model_len]
    top = round(math.log2(max_model_len))   # Python's round, as NxD Inference's
    return [2 ** i for i in range(int(math.log2(MIN_BUCKET)), top)] + [max_model_len]


def pick_bucket(tokens: int, buckets: list[int]) -> int:
    """The smallest bucket that holds `tokens` (the prompt chunk is padded to it)."""
    fits = [b for b in sorted(buckets) if b >= tokens]
    if not fits:
        raise ValueError(f"no prefill bucket holds {tokens} tokens (buckets {sorted(buckets)}); add a larger "
                         f"one to --buckets or prefill in chunks with --prefill-chunk-size")
    return fits[0]


def _text(config):
    return getattr(config, "text_config", None) or config


def _uniform_layers(config) -> bool:
    """Whether every decoder layer is the same program: one attention kind, and no MoE config that
    keeps some layers dense (Qwen-MoE's mlp_only_layers / decoder_sparse_step, DeepSeek's first_k_dense_replace)."""
    text = _text(config)
    kinds = getattr(text, "layer_types", None)
    if kinds and len(set(kinds)) > 1:
        return False
    return not (getattr(text, "mlp_only_layers", None) or (getattr(text, "first_k_dense_replace", 0) or 0) > 0
                or (getattr(text, "decoder_sparse_step", 1) or 1) > 1)


def _with_depth(config, layers: int):
    c = copy.deepcopy(config)
    text = _text(c)
    text.num_hidden_layers = layers
    if getattr(text, "layer_types", None):
        text.layer_types = list(text.layer_types[:layers])
    return c


def check_arguments(batch: int, concurrency: int | None, input_tokens: int, output_tokens: int,
                    prefill_chunk_size: int | None, max_model_len: int | None, buckets,
                    decode_batch: int | None = None) -> None:
    """Every flag of the deployed plan, checked before anything is built; messages name the flag."""
    for name, value in (("--batch", batch), ("--input-tokens", input_tokens), ("--output-tokens", output_tokens)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if concurrency is not None:
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"--concurrency must be a positive integer (requests in flight), got {concurrency!r}")
        if batch != 1:
            raise ValueError(f"--concurrency {concurrency} with --batch {batch}: choose one; --batch plans a static "
                             f"batch encoded and decoded together, --concurrency continuous batching of single requests")
    if prefill_chunk_size is not None and (not isinstance(prefill_chunk_size, int) or prefill_chunk_size < 1):
        raise ValueError(f"--prefill-chunk-size must be a positive integer, got {prefill_chunk_size!r}")
    if max_model_len is not None and max_model_len < input_tokens + output_tokens:
        raise ValueError(f"--max-model-len {max_model_len} is shorter than --input-tokens + --output-tokens = "
                         f"{input_tokens + output_tokens}; the static KV cache must hold the whole sequence")
    if decode_batch is not None:
        live = concurrency or batch
        if not isinstance(decode_batch, int) or decode_batch < 1:
            raise ValueError(f"--decode-batch must be a positive integer (the sequences the decode graph is "
                             f"compiled for), got {decode_batch!r}")
        if decode_batch < live:
            raise ValueError(f"--decode-batch {decode_batch} is smaller than the {live} sequences decoding together "
                             f"(--batch / --concurrency): the compiled decode batch must hold them all")
    if buckets is not None and (not buckets or any(not isinstance(b, int) or b < 1 for b in buckets)):
        raise ValueError(f"--buckets must be positive token counts, got {buckets!r}")


def _static_cache(config, layout: Layout, dtype, batch: int, max_len: int):
    """transformers' StaticCache of `max_len` tokens for `batch` sequences, this TP rank's KV heads, allocated
    (with TP above the KV-head count, one replicated KV head per rank, as build_causal_lm shards them)."""
    from transformers import StaticCache

    from ._build import replicated_kv_config

    config = replicated_kv_config(config, layout.tp)
    text = _text(config)
    kv_heads = getattr(text, "num_key_value_heads", None) or text.num_attention_heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    per_rank = kv_heads // layout.tp if tp_shards_kv_heads(text) else kv_heads
    cache = StaticCache(config=config, max_cache_len=max_len)
    cache.early_initialization(batch, per_rank, head_dim, dtype, torch.device("neuron", 0))
    return cache


def _prompt_cache(config, cache, batch: int, tokens: int):
    """The context encoding's view of the deployment's one cache: its first `batch` sequences and
    `tokens` positions (serving.CTE_ATTENTION: NxD Inference's context encoding attends within the
    prompt's bucket, then the token generation attends over the whole cache). Views, so nothing is
    allocated: the prompt's keys and values land in the cache the decode steps read."""
    from transformers import StaticCache

    view = StaticCache(config=config, max_cache_len=tokens)
    for mine, whole in zip(view.layers, cache.layers):
        mine.keys, mine.values = whole.keys[:batch, :, :tokens], whole.values[:batch, :, :tokens]
        mine.dtype, mine.device, mine.batch_size, mine.num_heads = whole.dtype, whole.device, batch, whole.num_heads
        mine.k_head_dim, mine.v_head_dim = whole.k_head_dim, whole.v_head_dim
        mine.cumulative_length = whole.cumulative_length.clone()
        mine.is_initialized = True
    return view


def _probe(config, layout: Layout, dtype, cte_batch: int, bucket: int, tkg_batch: int, max_len: int,
           position: int, graphs=("cte", "tkg"), sequence_parallel: bool = False, routing=None) -> dict:
    """Build the model at this config's depth, compile the step and time one call of each of `graphs`
    (CTE, TKG), the model sequence-parallel if asked (_sequence_parallel.py); routed experts run as
    NxD Inference's MoE kernels under `routing` (_moe_kernel.py)."""
    with fake_world(layout.tp), contextlib.ExitStack() as kernels:
        region = Region(layout, "deployed probe")
        model = compiled = step = None
        out = {}
        with region:
            model = build_causal_lm(config, dtype, tp=layout.tp, sequence_parallel=sequence_parallel)
            moe_kernel.shard_experts(model, layout.ep)   # --ep: this rank's experts (vLLM-Neuron's EP)
            model.eval()
            seq_len = [1]   # tokens per sequence of the step being compiled (NxD's CTE / TKG choice)
            out["moe_kernel"] = kernels.enter_context(moe_kernel.deployed(model, routing or Routing(),
                                                                          lambda: seq_len[0]))
            device = torch.device("neuron", 0)
            from torch.distributed.tensor import DTensor, Replicate

            def step(input_ids, position_ids, cache_position, cache):
                logits = model(input_ids=input_ids, position_ids=position_ids, cache_position=cache_position,
                               past_key_values=cache, use_cache=True, logits_to_keep=1).logits
                last = logits[:, -1, :]
                if isinstance(last, DTensor):   # sequence parallel: the head's logits are sharded over the vocabulary
                    last = last.redistribute(placements=[Replicate()]).to_local()
                return torch.argmax(last, dim=-1, keepdim=True)   # on-device sampling (greedy)

            compiled = torch.compile(step, backend="neuron", dynamic=False, fullgraph=False)
            tkg_cache = _static_cache(config, layout, dtype, tkg_batch, max_len)   # the deployment's one cache
            out["kv_cache"] = local_bytes(t for layer in tkg_cache.layers for t in (layer.keys, layer.values))
            cte_cache = _prompt_cache(config, tkg_cache, cte_batch, bucket)   # the CTE attends within the prompt

            def inputs(cache, batch, tokens, start):
                for layer in cache.layers:   # the cache counts what it holds: this step writes at `start`
                    layer.cumulative_length.fill_(start)
                ids = torch.zeros((batch, tokens), dtype=torch.long, device=device)   # any token ids
                pos = torch.arange(start, start + tokens, device=device)
                return ids, pos.unsqueeze(0).expand(batch, -1), pos, cache

            build_peak = torch.neuron.max_memory_allocated(0)
            held = torch.neuron.memory_allocated(0)   # weights and caches: what the steps start from
            torch.neuron.reset_peak_memory_stats(0)
            with torch.no_grad():
                calls = {"cte": (cte_cache, cte_batch, bucket, 0), "tkg": (tkg_cache, tkg_batch, 1, position)}
                for name, args in ((g, calls[g]) for g in graphs):
                    seq_len[0] = args[2]
                    with region.timed():   # both calls under the estimate: its hooks are part of Dynamo's guards
                        compiled(*inputs(*args))     # compiles
                        step_inputs = inputs(*args)  # made before the mark: the host feeds them
                        a = len(region.est.events)
                        compiled(*step_inputs)
                        b = len(region.est.events)
                    events = region.est.events[a:b]
                    out[name] = {"seconds": region.seconds(a, b), "flops": region.flops(a, b),
                                 "bytes": sum(e.bytes for e in events), "collectives": region.collectives(a, b),
                                 "time_breakdown_s": region.by_category(a, b),
                                 "roofline": region.roofline(a, b),
                                 "graph_calls": sum(1 for e in events if e.kind == "graph")}
            out["step_transient"] = torch.neuron.max_memory_allocated(0) - held
            del cte_cache
        out["base"] = base_report(layout, config, model, region, dtype, None)
        out["sequence_parallel"] = bool(getattr(model, "_sequence_parallel", False))
        # Dynamo's cache holds the compiled step and through it the model: free both before the next probe
        del compiled, step
        torch._dynamo.reset()
        kernels.close()
        if "step_transient" in out:   # the peak of the whole probe: building, or a step on top of what is held
            peak = max(build_peak, held + out["step_transient"])
            out["base"].update(peak_hbm_bytes_per_core=peak, headroom_bytes_per_core=region.capacity - peak,
                               fits=peak <= region.capacity)
        del model
    return out


def _held_at_depth(config, layout: Layout, dtype, batches: set[int], max_len: int) -> dict:
    """The full-depth model and its static caches, allocated (nothing run): what a deployment holds,
    and the allocator's own message if it does not fit."""
    with fake_world(layout.tp):
        region = Region(layout, "deployed (full depth)")
        model, caches = None, []
        with region:
            model = build_causal_lm(config, dtype, tp=layout.tp)
            moe_kernel.shard_experts(model, layout.ep)
            for batch in sorted(batches):
                caches.append(_static_cache(config, layout, dtype, batch, max_len))
        out = {"base": base_report(layout, config, model, region, dtype, None),
               "held": torch.neuron.memory_allocated(0)}
        del model, caches
    return out


def _extrapolate(a: dict, b: dict, da: int, db: int, depth: int):
    """Each number of probe `b` (depth db) extrapolated linearly from probe `a` (depth da) to `depth`;
    a count the shallower probe lacks (a kernel between two layers) grows from 0."""
    if isinstance(a, dict):
        return {k: _extrapolate(a.get(k, 0 if isinstance(v, (int, float)) else None), v, da, db, depth)
                for k, v in b.items()}
    if isinstance(b, bool) or not isinstance(b, (int, float)) or not isinstance(a, (int, float)):
        return b
    value = b + (b - a) * (depth - db) / (db - da)
    return type(b)(round(value)) if isinstance(b, int) else value


def plan_deployed(config, layout: Layout, *, batch: int = 1, concurrency: int | None = None,
                  input_tokens: int = 128, output_tokens: int = 16, dtype: torch.dtype = torch.bfloat16,
                  prefill_chunk_size: int | None = None, max_model_len: int | None = None,
                  buckets: list[int] | None = None, full_depth: bool = False,
                  sequence_parallel: bool = False, routing=None, decode_batch: int | None = None) -> dict:
    """Plan serving on one TP group (DP replicas, world / TP, serve their own requests); with
    `sequence_parallel`, the CTE runs sequence-parallel (NxD Inference's `sequence_parallel_enabled`);
    `layout.ep` > 1 splits an MoE config's experts over EP groups within the TP group.
    `routing` (a _routing.Routing or its --routing text): where the routers send tokens (MoE configs).
    `decode_batch`: the sequences the TKG graph is compiled for, the live ones padded to it
    (serving.DECODE_BATCH; default: the live ones, --batch or --concurrency)."""
    check_arguments(batch, concurrency, input_tokens, output_tokens, prefill_chunk_size, max_model_len, buckets,
                    decode_batch)
    routing = routing if isinstance(routing, Routing) else parse_routing(routing)
    if sequence_parallel and layout.tp == 1:
        raise ValueError("--sequence-parallel splits the prompt over the TP ranks: it needs --tp 2 or more")
    original = config
    config = padded_for_tp(config, layout.tp)   # as NxD Inference compiles it
    layout = serving_expert_parallel(layout, layout.ep, config)   # --ep within the TP group (docs/moe.md)
    check_model(layout, config)
    max_len = max_model_len or input_tokens + output_tokens
    given_buckets = bool(buckets)
    buckets = sorted(buckets) if buckets else default_buckets(max_len)
    chunk = min(input_tokens, prefill_chunk_size or input_tokens)
    bucket = pick_bucket(chunk, buckets)
    if bucket > max_len:
        max_len = bucket   # the padded chunk must fit the cache as the compiled graph writes it
    cte_batch = 1 if concurrency else batch
    tkg_batch = decode_batch or concurrency or batch   # the compiled decode batch, the live sequences padded to it
    depth = _text(config).num_hidden_layers
    probes = [depth] if full_depth or depth <= 2 or not _uniform_layers(config) else [1, 2]
    full = None
    if len(probes) == 2:   # first, in a process that holds nothing else yet
        full = _held_at_depth(config, layout, dtype, {tkg_batch}, max_len)   # the deployment's one cache
    results = []
    for d in probes:
        # the model freed before (full depth, the shallower probe) is cyclic garbage until the
        # collector runs: collect it first, so the probe starts from what it holds and its step's
        # transient bytes are not understated by garbage freed while the step runs
        gc.collect()
        at_depth = _with_depth(config, d)
        if not sequence_parallel:
            results.append(_probe(at_depth, layout, dtype, cte_batch, bucket, tkg_batch, max_len, input_tokens,
                                  routing=routing))
            continue
        # NxD Inference's sequence parallelism runs in the CTE only (a decode step has one token per
        # sequence): the TKG and the memory from the model as TP shards it, the CTE from its
        # sequence-parallel build
        plain = _probe(at_depth, layout, dtype, cte_batch, bucket, tkg_batch, max_len, input_tokens, ("tkg",),
                       routing=routing)
        gc.collect()
        parallel = _probe(at_depth, layout, dtype, cte_batch, bucket, tkg_batch, max_len, input_tokens, ("cte",),
                          sequence_parallel=True, routing=routing)
        plain["cte"] = parallel.get("cte")
        plain["sequence_parallel_cte"] = parallel["sequence_parallel"]
        plain["step_transient"] = max(plain.get("step_transient", 0), parallel.get("step_transient", 0))
        plain["base"]["oom"] = plain["base"]["oom"] or parallel["base"]["oom"]
        results.append(plain)
    if full is not None:
        results.append(full)
    ooms = [r["base"]["oom"] for r in results if r["base"]["oom"]]
    fig = results[0] if len(probes) == 1 or ooms else _extrapolate(results[0], results[1], *probes, depth)
    report = fig["base"]
    if len(probes) == 2 and not ooms:
        # memory: the full-depth model and caches as allocated, plus the deeper probe's step on top
        # (a step's transient buffers do not grow with depth: each layer's are freed before the next)
        report = full["base"]
        peak = max(report["peak_hbm_bytes_per_core"], full["held"] + results[1]["step_transient"])
        report.update(peak_hbm_bytes_per_core=peak, headroom_bytes_per_core=report["hbm_capacity_bytes_per_core"] - peak,
                      fits=peak <= report["hbm_capacity_bytes_per_core"])
        report["time_breakdown_s"] = fig["base"]["time_breakdown_s"]
    report["oom"] = ooms[0] if ooms else None
    report["fits"] = report["fits"] and not ooms
    report["sequence_parallel"] = bool(sequence_parallel and all(r.get("sequence_parallel_cte") for r in results
                                                                 if "cte" in r))
    if sequence_parallel and not report["sequence_parallel"]:
        report["sequence_parallel_note"] = ("off: the model is not a Llama-style decoder (q/k/v/o and gate/up/down "
                                            "projections, two RMSNorms per layer) that the sequence-parallel plan "
                                            "covers; the CTE is planned tensor-parallel")
    # the real model's count (meta device): not the padded one's, not a depth probe's, and stated
    # when the model did not fit
    report["parameters"] = parameter_count(original)
    report.update(padding_fields(original, config))
    replicas = layout.world_size // layout.tp
    report.update({
        "mode": "deployed", "serving": "continuous batching" if concurrency else "static batch",
        "batch": batch, "concurrency": concurrency, "decode_batch": tkg_batch, "input_tokens": input_tokens, "output_tokens": output_tokens,
        "prefill_chunk_size": prefill_chunk_size, "max_model_len": max_len, "buckets": buckets,
        "compiled": True, "replicas": replicas, "depth_probes": probes, "depth": depth, "ep": layout.ep,
        "ttft_ms": None, "tpot_ms": None, "output_tokens_per_s": None, "output_tokens_per_s_all_replicas": None,
    })
    if ooms:
        return report
    report["memory_breakdown_bytes_per_core"]["kv_cache"] = fig["kv_cache"]
    host_step_s = assumptions_mod.from_env().serving_host_step_s
    steps = serving.with_host(serving.Steps(fig["cte"]["seconds"], fig["tkg"]["seconds"]), host_step_s)
    report["graphs"] = {
        "context_encoding": {"bucket_tokens": bucket, "batch": cte_batch, **fig["cte"]},
        "token_generation": {"batch": tkg_batch, "kv_cache_tokens": max_len, **fig["tkg"]},
    }
    report["assumptions_serving"] = serving.assumptions(bool(concurrency), default_buckets=not given_buckets,
                                                        padded_decode=tkg_batch > (concurrency or batch))
    report["host_step_s"] = host_step_s
    moe = moe_kernel.report_section(fig.get("moe_kernel"), original, routing, (cte_batch * bucket, bucket),
                                    (tkg_batch, 1), report["graphs"], layout)
    if moe:
        report["moe"] = moe
    if concurrency:
        figures = serving.continuous(steps, concurrency, input_tokens, output_tokens, chunk)
    else:
        figures = serving.static_batch(steps, batch, input_tokens, output_tokens, chunk)
    report.update({
        "ttft_ms": figures["ttft_s"] * 1e3, "tpot_ms": figures["tpot_s"] * 1e3,
        "output_tokens_per_s": figures["output_tokens_per_s"],
        "output_tokens_per_s_all_replicas": replicas * figures["output_tokens_per_s"]
        if figures["output_tokens_per_s"] else None,
        "requests_per_s": figures["requests_per_s"], "prefill_steps": figures["prefill_steps"],
        "prefill_share": figures["prefill_share"], "queue_wait_ms": figures.get("queue_wait_s", 0.0) * 1e3,
        "time_breakdown_s": fig["tkg"]["time_breakdown_s"], "collectives": fig["tkg"]["collectives"],
    })
    return report
