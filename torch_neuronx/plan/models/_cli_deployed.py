"""`plan generate`'s deployed mode on the command line (the default; `--mode eager` is generate())."""
from __future__ import annotations

import argparse

from .._wording import deployed_layout_lines, figure as fmt, plural

MODES = ("deployed", "eager")


def _buckets(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--buckets takes token counts separated by commas, got {text!r}") from None


def add_deployed_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mode", choices=MODES, default="deployed",
                   help="deployed (default): compiled context-encoding and token-generation graphs over a static "
                        "KV cache, sampling on the device, as NxD Inference / vLLM-Neuron serve; eager: Hugging "
                        "Face generate() op by op (--compile compiles its decode step)")
    p.add_argument("--concurrency", type=int, default=None,
                   help="deployed: continuous batching with N requests in flight (TTFT and TPOT under load); "
                        "default: one static batch of --batch prompts")
    p.add_argument("--decode-batch", type=int, default=None,
                   help="deployed: sequences the token-generation graph is compiled for (NxD Inference's "
                        "batch_size, vLLM's max_num_seqs); every decode step runs them all, the live ones "
                        "(--batch or --concurrency) padded to it. Default: the live sequences")
    p.add_argument("--max-model-len", type=int, default=None,
                   help="deployed: tokens the static KV cache holds per sequence (default: input + output tokens)")
    p.add_argument("--buckets", type=_buckets, default=None,
                   help="deployed: prefill buckets, e.g. 128,512,2048 (default: NxD Inference's, powers of two "
                        "from 128 and the max length)")
    p.add_argument("--full-depth", action="store_true",
                   help="deployed: compile every layer instead of extrapolating from 1- and 2-layer probes")
    p.add_argument("--sequence-parallel", action="store_true",
                   help="deployed: run the context encoding sequence-parallel, as NxD Inference's "
                        "sequence_parallel_enabled does (norms and residuals on 1/TP of the prompt; its "
                        "all-reduces become reduce-scatter + all-gather); the decode step is unchanged")


def _title(report: dict) -> str:
    how = (f"continuous batching, {report['concurrency']} requests in flight" if report["concurrency"]
           else f"static batch of {report['batch']}")
    depth = ("full depth" if len(report["depth_probes"]) == 1
             else f"{report['depth']} layers extrapolated from 1- and 2-layer probes")
    return (f"generate (mode deployed: compiled CTE and TKG graphs, static KV cache of {report['max_model_len']} "
            f"tokens, on-device sampling; {how}; {depth})")


def _rows(report: dict) -> list[tuple[str, str]]:
    rows = [("TTFT", fmt(report["ttft_ms"], " ms")), ("per output token (TPOT)", fmt(report["tpot_ms"], " ms")),
            ("output tokens/s (one TP group)", fmt(report["output_tokens_per_s"])),
            (f"output tokens/s ({plural(report['replicas'], 'replica')})", fmt(report["output_tokens_per_s_all_replicas"]))]
    graphs = report.get("graphs")
    if graphs:
        cte, tkg = graphs["context_encoding"], graphs["token_generation"]
        rows += [(f"CTE step ({cte['bucket_tokens']}-token bucket, batch {cte['batch']}) x {report['prefill_steps']}",
                  fmt(cte["seconds"], " ms", 1e3)),
                 (f"TKG step (batch {tkg['batch']}{_live(report)}, cache {tkg['kv_cache_tokens']} tokens)",
                  fmt(tkg["seconds"], " ms", 1e3)),
                 ("host's share of each step (assumption `serving_host_step_s`)", fmt(report["host_step_s"], " ms", 1e3)),
                 ("requests/s (one TP group)", fmt(report["requests_per_s"]))]
        if report["concurrency"]:
            rows += [("queueing before prefill", fmt(report["queue_wait_ms"], " ms")),
                     ("device time in prefill", fmt(report["prefill_share"], "%", 100, 3))]
        rows += _moe_rows(report.get("moe"))
        rows += [(f"assumption `{name}`", text) for name, text in report["assumptions_serving"].items()]
    rows += deployed_layout_lines(report)
    return rows


def _live(report: dict) -> str:
    live = report["concurrency"] or report["batch"]
    return f", {live} live, padded" if report["decode_batch"] > live else ""


def _moe_rows(moe: dict | None) -> list[tuple[str, str]]:
    """What the routed experts cost per step, as NxD Inference runs them (docs/moe.md)."""
    if not moe:
        return []
    if not isinstance(moe, dict):   # an MoE config whose experts module the kernels do not take (_moe_kernel.py)
        return [("MoE experts", "planned as the model's Hugging Face code computes them, not as NxD Inference's MoE "
                                "kernels: its experts module is not transformers' experts interface")]
    rows = [("MoE routing", f"{moe['routing']} (busiest expert {moe['busiest_expert_load_vs_balanced']:.3g}x "
                            f"its balanced load)")]
    for name, key in (("CTE", "context_encoding"), ("TKG", "token_generation")):
        c = moe[key]
        how = c["algorithm"].replace("_", " ")
        if c["algorithm"] == "blockwise":
            how += (f", {c['blocks_run']} blocks of {c['block_size']} per layer run "
                    f"({c['blocks_with_tokens']} hold tokens)")
        else:
            how += f", {c['expert_loads']} expert loads per layer"
        rows.append((f"MoE experts in the {name} step ({moe['layers']} layers)",
                     f"{fmt(c['seconds_all_layers'], ' ms', 1e3)}: {how}"))
    return rows


def eager_flag_error(args) -> str | None:
    """The deployed-only flag given with --mode eager, if any (generate() has no such knob)."""
    for flag, value in (("--concurrency", args.concurrency), ("--decode-batch", args.decode_batch),
                        ("--max-model-len", args.max_model_len),
                        ("--buckets", args.buckets), ("--full-depth", args.full_depth or None),
                        ("--sequence-parallel", args.sequence_parallel or None),
                        ("--ep", args.ep if args.ep != 1 else None)):
        if value is not None:
            return f"{flag} plans the deployed mode; drop it or --mode eager"
    return None


def plan_deployed_report(args, layout, config) -> tuple[dict, str, list[tuple[str, str]]]:
    """Plan the deployed mode (`args`: options.GenerateOptions, its flags checked already) in this
    process, whose runtime is the plan's: (report, title, rows of the markdown)."""
    import torch

    from ._deployed import plan_deployed

    report = plan_deployed(config, layout, batch=args.batch, concurrency=args.concurrency,
                           input_tokens=args.input_tokens, output_tokens=args.output_tokens,
                           dtype=getattr(torch, args.dtype), prefill_chunk_size=args.prefill_chunk_size,
                           max_model_len=args.max_model_len, buckets=args.buckets, full_depth=args.full_depth,
                           sequence_parallel=args.sequence_parallel, routing=args.routing,
                           decode_batch=args.decode_batch)
    return report, _title(report), _rows(report)
