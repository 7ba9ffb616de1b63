"""Command lines of the model-level plans: `generate` and `train` (`sweep` is _sweep.py).

    python -m torch_neuronx.plan generate --config CONFIG.json --instance trn2.48xlarge --tp 64 ...
    python -m torch_neuronx.plan train --config CONFIG.json --instance trn1.32xlarge --nodes 32 --tp 32 ...

Each plans in a process whose neuron runtime is the plan's: the instance type, LNC and the dry run
are read when the runtime starts, so a command started otherwise runs itself again in a child with
them in its environment (plan/_command.py `ensure_runtime`), and the allocator has the instance's
HBM per core. The parsed flags become one checked options object per command (_options.py),
passed down as `args`.
"""
from __future__ import annotations

import argparse

from .. import _command as command
from .._wording import figure as fmt, plural, train_layout_lines
from ._cli_deployed import add_deployed_arguments, plan_deployed_report
from ._layout import LayoutError

DTYPES = ("bfloat16", "float16", "float32")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, help="a transformers config.json (or its folder)")
    p.add_argument("--instance", default="trn2.48xlarge", help="instance type, e.g. trn2.48xlarge")
    p.add_argument("--lnc", type=int, default=None, help="logical NeuronCore size 1 or 2 (default: the chip's)")
    p.add_argument("--nodes", type=int, default=1, help="instances")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel degree")
    p.add_argument("--dtype", choices=DTYPES, default="bfloat16")
    p.add_argument("--json", help="write the report here")
    p.add_argument("--real", action="store_true",
                   help="run for real instead of a dry run: every byte is allocated on this host (tiny configs)")
    p.add_argument("--routing", default=None,
                   help="MoE configs: where the routers send tokens: balanced (default), skewed=S (the busiest "
                        "expert takes S x its balanced share) or a JSON histogram file of tokens per expert")
    command.add_view_arguments(p)


def add_generate_arguments(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--input-tokens", type=int, default=128)
    p.add_argument("--output-tokens", type=int, default=16)
    p.add_argument("--prefill-chunk-size", type=int, default=None)
    p.add_argument("--compile", action="store_true", help="--mode eager: compile the decode step (backend neuron)")
    p.add_argument("--ep", type=int, default=1,
                   help="deployed, MoE configs: expert-parallel degree within the TP group (vLLM-Neuron's "
                        "ep_degree): each rank holds experts / EP experts, their intermediate size split TP / EP "
                        "ways; attention and dense layers stay TP. Divides --tp and the experts")
    add_deployed_arguments(p)


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--pp", type=int, default=1, help="pipeline stages (outermost in the rank order)")
    p.add_argument("--pp-schedule", default="1f1b", help="pipeline schedule: gpipe, 1f1b or interleaved")
    p.add_argument("--pp-chunks", type=int, default=None,
                   help="model chunks per stage (interleaved's virtual stages; default 2 for interleaved)")
    p.add_argument("--ep", type=int, default=1, help="expert-parallel degree (MoE configs; a multiple of --tp)")
    p.add_argument("--fsdp", type=int, default=1, help="FSDP shards, as DistributedConfig(fsdp_size)")
    p.add_argument("--cp", type=int, default=1,
                   help="context parallelism: the sequence split over CP ranks, ring attention (torch's "
                        "context_parallel); FSDP shards over FSDP x CP")
    p.add_argument("--dp", type=int, default=None, help="data-parallel replicas (default: the cores left)")
    p.add_argument("--zero1", action="store_true", help="ZeRO-1: shard the AdamW state over the DP replicas (with --tp: NxD Training's TP x ZeRO-1)")
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--global-batch", type=int, default=None,
                   help="default: micro-batch x FSDP x DP (x 2 x PP x chunks micro-batches with --pp)")
    p.add_argument("--seq-len", type=int, default=2048)
    p.add_argument("--gradient-checkpointing", action="store_true")
    p.add_argument("--sequence-parallel", action=argparse.BooleanOptionalAction, default=True,
                   help="with --tp: norms and residuals on 1/TP of the sequence and a vocabulary-parallel loss, "
                        "as NxD Training runs TP (default on)")
    p.add_argument("--task", default="auto",
                   help="what the model trains as: causal-lm, masked-lm (BERT-style pretraining), "
                        "image-classification (ViT-style), or auto (from the config; default)")
    p.add_argument("--activation-recompute", default=None,
                   help="none, full (every layer checkpointed; what --gradient-checkpointing turns on) or "
                        "selective (Megatron's: only the attention core recomputed)")
    p.add_argument("--make-vocab-size-divisible-by", type=int, default=None, metavar="N",
                   help="pad the vocabulary to a multiple of N x TP, as Megatron-LM's flag of that name (default: "
                        "Megatron's 128 x TP when TP does not divide the vocabulary, else no padding)")
    p.add_argument("--torch-compile", action="store_true",
                   help="run the model as torch.compile(backend='neuron', dynamic=False), as the Trainer's "
                        "--torch_compile true does on neuron")


def _prepare(args, prog: str):
    """Layout and config in the plan's own process, or exit 2 with the reason."""
    from ._load_config import ConfigError, load_config

    layout = args.layout
    # before transformers loads: a child loads it anyway
    command.ensure_runtime(prog, args.argv(), instance=layout.instance, lnc=layout.lnc, dry_run=args.dry_run,
                           json_out=args.json)
    try:
        config = load_config(args.config)
    except ConfigError as err:
        command.fail(prog, str(err))
    return layout, config


def _finish(report: dict, args, title: str, rows, collected) -> int:
    from ._report import markdown, write_json

    report["notes"] = collected.section(report["unmodelled_ops"], report.get("ops_by_name"))
    return command.finish(report, markdown(report, title, rows), json_out=args.json, html=args.html,
                          status=0 if report["fits"] else 1, write_json=write_json)


def _plan_eager(args, layout, config) -> tuple[dict, str, list[tuple[str, str]]]:
    """`plan generate --mode eager`: Hugging Face generate() op by op; (report, title, rows)."""
    import torch

    from ._generate import plan_generate

    report = plan_generate(config, layout, batch=args.batch, input_tokens=args.input_tokens,
                           output_tokens=args.output_tokens, dtype=getattr(torch, args.dtype),
                           prefill_chunk_size=args.prefill_chunk_size, compile=args.compile,
                           dry_run=not args.real, routing=args.routing)
    report["mode"] = "compiled (decode step: torch.compile, backend neuron)" if args.compile else "eager"
    rows = [("TTFT", fmt(report["ttft_ms"], " ms")), ("per output token", fmt(report["tpot_ms"], " ms")),
            ("output tokens/s (one TP group)", fmt(report["output_tokens_per_s"])),
            (f"output tokens/s ({plural(report['replicas'], 'replica')})",
             fmt(report["output_tokens_per_s_all_replicas"]))]
    title = "generate (mode eager: Hugging Face generate()" + (", decode step compiled)" if args.compile else ")")
    return report, title, rows


def run_generate(args) -> int:
    """`plan generate`; `args` are its checked options (options.GenerateOptions)."""
    prog = "python -m torch_neuronx.plan generate"
    plan = plan_deployed_report if args.mode == "deployed" else _plan_eager
    with command.started("generate", quiet=args.quiet, verbose=args.verbose) as collected:
        layout, config = _prepare(args, prog)
        try:
            report, title, rows = plan(args, layout, config)
        except (LayoutError, ValueError) as err:
            command.fail(prog, str(err))
    return _finish(report, args, title, rows, collected)


def run_train(args) -> int:
    """`plan train`; `args` are its checked options (options.TrainOptions)."""
    prog = "python -m torch_neuronx.plan train"
    with command.started("train", quiet=args.quiet, verbose=args.verbose) as collected:
        layout, config = _prepare(args, prog)
        import torch

        from ._train import plan_train

        try:
            report = plan_train(config, layout, micro_batch=args.micro_batch, global_batch=args.global_batch,
                                seq_len=args.seq_len, dtype=getattr(torch, args.dtype),
                                gradient_checkpointing=args.gradient_checkpointing, dry_run=not args.real,
                                zero1=args.zero1, sequence_parallel=args.sequence_parallel, task=args.task,
                                activation_recompute=args.activation_recompute, torch_compile=args.torch_compile,
                                make_vocab_size_divisible_by=args.make_vocab_size_divisible_by,
                                routing=args.routing)
        except (LayoutError, ValueError) as err:
            command.fail(prog, str(err))
        # eager: the model's ops one by one; compiled: its forward and backward as neuron graphs
        report["mode"] = ("compiled (torch.compile, backend neuron; optimizer step eager)" if args.torch_compile
                          else "eager")
    rows = [("step time", fmt(report["step_time_s"], " s")), ("tokens/s", fmt(report["tokens_per_s"])),
            ("sequences/s", fmt(report["sequences_per_s"])), ("MFU", fmt(report["mfu"], "%", 100, 3)),
            ("gradient accumulation", plural(report["grad_accum_steps"], "micro-step")),
            ("FLOPs per core per step", fmt(report.get("flops_per_core")))]
    if report.get("pipeline"):
        pipe = report["pipeline"]
        rows.append(("pipeline", f"{pipe['schedule']}, {pipe['stages']} stages x {pipe['chunks_per_stage']} chunks, "
                                 f"{pipe['microbatches']} micro-batches, bubble {pipe['bubble_fraction']:.1%}"))
    rows += train_layout_lines(report)
    return _finish(report, args, "train", rows, collected)
