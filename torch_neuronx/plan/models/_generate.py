"""`plan generate`: a real `generate()` of the HF model built from its config, estimated per phase.

TTFT is everything up to the first forward that feeds one token per sequence (prefill, in chunks
when `prefill_chunk_size` is set, plus picking the first token); TPOT is the mean time of the
decode steps after it. The KV cache is static (`max_cache_len` = input + output tokens), as
Neuron's static graphs require.
"""
from __future__ import annotations

import torch

from . import _routing as moe_routing
from .. import _progress as progress
from ._build import build_causal_lm, local_bytes
from ._layout import Layout, check_model
from ._measure import Region
from ._report import base_report
from ._world import fake_world


def plan_generate(config, layout: Layout, *, batch: int = 1, input_tokens: int = 128, output_tokens: int = 16,
                  dtype: torch.dtype = torch.bfloat16, prefill_chunk_size: int | None = None,
                  compile: bool = False, dry_run: bool = False, routing=None) -> dict:
    """Plan one `generate()` call on one TP group; DP replicas (world / TP) serve their own batches.
    `routing`: where a MoE config's routers send tokens (_routing.py; balanced by default)."""
    check_model(layout, config)
    routing = moe_routing.as_routing(routing)
    if batch < 1 or input_tokens < 1 or output_tokens < 1:
        raise ValueError(f"--batch, --input-tokens and --output-tokens must be >= 1, got "
                         f"{batch}, {input_tokens}, {output_tokens}")
    from transformers import CompileConfig, GenerationConfig

    replicas = layout.world_size // layout.tp
    model = None
    with fake_world(layout.tp):
        region = Region(layout, "generate")
        out = None
        call = None   # none if the generate ran out of memory
        with region:
            progress.stage("building the model and sharding it" if layout.tp > 1 else "building the model")
            model = build_causal_lm(config, dtype, tp=layout.tp)
            model.eval()
            if not compile:   # a compiled decode step keeps the router's own choices
                moe_routing.install(model, routing)

            vocab = getattr(config, "vocab_size", None) or config.get_text_config().vocab_size
            ids = torch.randint(0, vocab, (batch, input_tokens), device="neuron:0")
            gen = GenerationConfig(
                do_sample=False, max_new_tokens=output_tokens, min_new_tokens=output_tokens,
                eos_token_id=None, pad_token_id=0, cache_implementation="static",
                cache_config={"max_cache_len": input_tokens + output_tokens},
                prefill_chunk_size=prefill_chunk_size, return_dict_in_generate=True,
                disable_compile=not compile,
                compile_config=CompileConfig(backend="neuron", fullgraph=False, dynamic=False) if compile else None)
            progress.stage("generating", total=output_tokens, unit="token")
            with region.generate_calls() as calls:   # the phases, as a dry run's report times every generate()
                seen = len(calls.calls)
                try:
                    with torch.no_grad(), region.timed():
                        out = model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=gen)
                finally:
                    call = calls.calls[-1] if len(calls.calls) > seen else None
        report = base_report(layout, config, model, region, dtype, dry_run)
        report.update({
            "mode": "eager",   # generate() op by op; plan/models/_deployed.py plans the compiled deployment
            "batch": batch, "input_tokens": input_tokens, "output_tokens": output_tokens,
            "prefill_chunk_size": prefill_chunk_size, "compiled": compile, "replicas": replicas,
            "forward_calls": call["forward_calls"] if call else None, "generated_tokens": None,
            "ttft_ms": None, "tpot_ms": None,
            "output_tokens_per_s": None, "output_tokens_per_s_all_replicas": None, "generate_s": None,
        })
        if region.oom is None:
            generated, total = call["new_tokens"], call["seconds"]
            tpot = call["tpot_ms"] / 1e3 if call["tpot_ms"] is not None else 0.0
            cache = getattr(out, "past_key_values", None)
            kv = local_bytes(t for layer in getattr(cache, "layers", []) for t in (layer.keys, layer.values)) \
                if cache is not None else None
            report["memory_breakdown_bytes_per_core"]["kv_cache"] = kv
            report.update({
                "generated_tokens": generated, "generate_s": total, "ttft_ms": call["ttft_ms"], "tpot_ms": tpot * 1e3,
                "output_tokens_per_s": batch * generated / total if total else None,
                "output_tokens_per_s_all_replicas": replicas * batch * generated / total if total else None,
            })
        del out, model
    return report
