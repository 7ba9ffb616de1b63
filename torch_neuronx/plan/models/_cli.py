"""Command lines of the model-level plans: `generate`, `train` and `sweep`.

    python -m torch_neuronx.plan generate --config CONFIG.json --instance trn2.48xlarge --tp 64 ...
    python -m torch_neuronx.plan train --config CONFIG.json --instance trn1.32xlarge --nodes 32 --tp 32 ...
    python -m torch_neuronx.plan sweep --config CONFIG.json --instances trn2.48xlarge,trn3.48xlarge ...

Each plans in a process whose neuron runtime is the plan's: the instance type, LNC and the dry run
are read when the runtime starts, so a command started otherwise runs itself again in a child with
them in its environment (plan/_child.py), and the allocator has the instance's HBM per core. The
parsed flags become one checked options object per command (_options.py), passed down as `args`.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys

from .. import _child as child, _notes as notes, _progress as progress
from .._wording import plural, train_layout_lines
from ._cli_deployed import add_deployed_arguments, run_deployed
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
    add_view_arguments(p)


def add_view_arguments(p: argparse.ArgumentParser) -> None:
    """What the user sees while and after planning (every plan command has these)."""
    p.add_argument("--html", metavar="OUT.html", help="also write the report as one self-contained HTML page")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress display")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="stream warnings and library messages as they happen (else they are collected "
                        "into the report's notes)")


def _fail(prog: str, message: str):
    progress.finish("stopped")
    print(f"{prog}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def add_generate_arguments(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--input-tokens", type=int, default=128)
    p.add_argument("--output-tokens", type=int, default=16)
    p.add_argument("--prefill-chunk-size", type=int, default=None)
    p.add_argument("--compile", action="store_true", help="--mode eager: compile the decode step (backend neuron)")
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


def plan_settings(instance: str, lnc: int | None, real: bool, json_out: str | None) -> dict:
    """The environment settings of a plan's process (child.environment): instance, LNC and dry run,
    which the runtime reads when torch starts."""
    from .._config import DRY_RUN, REPORT

    settings = {"TORCH_NEURONX_INSTANCE_TYPE": instance,
                "NEURON_LOGICAL_NC_CONFIG": None if lnc is None else str(lnc)}
    settings.update(_addressable_cores(instance, lnc))
    if real:
        settings[DRY_RUN] = None
    else:
        # the whole process is the dry run (phantom memory from the first allocation on); its own
        # report (host syncs, per-core breakdown) goes beside --json instead of to stderr
        settings[DRY_RUN] = "1"
        if REPORT not in os.environ:
            settings[REPORT] = f"{os.path.splitext(json_out)[0]}.dryrun.json" if json_out else os.devnull
    return settings


def _addressable_cores(instance: str, lnc: int | None) -> dict:
    """A model-level plan runs rank 0's program on neuron:0. An instance with more logical cores than
    one process can address (trn3.48xlarge at LNC=1: 128) would stop the runtime, so the plan's
    process sees the first ones, as a torchrun worker is given a share (NEURON_RT_VISIBLE_CORES);
    a restriction the user set is kept."""
    from neuron_hardware.logical_core import HardwareChoiceError, logical_core_view

    from ...runtime.env import VISIBLE_CORES
    from ...runtime.topology import MAX_VISIBLE_CORES

    if os.environ.get(VISIBLE_CORES) or os.environ.get("NEURON_RT_NUM_CORES"):
        return {}
    try:
        cores = logical_core_view(instance, lnc).cores_per_instance
    except HardwareChoiceError:   # an unknown instance or LNC: the layout check reports it with its fix
        return {}
    return {VISIBLE_CORES: f"0-{MAX_VISIBLE_CORES - 1}"} if cores > MAX_VISIBLE_CORES else {}


def _runtime_is(layout, dry: bool) -> bool:
    import torch

    from ... import _C

    props = torch.neuron.get_device_properties(0)
    return (props.instance_type == layout.instance and props.physical_cores == layout.lnc
            and bool(_C._allocator_phantom()) == dry)


def _ensure_runtime(args, layout, prog: str) -> None:
    """Go on if this process's runtime is this plan's; else run the same command line in a child
    with the plan's environment (the instance is fixed when torch starts): its exit status is this
    command's (child.RanInChild)."""
    if _runtime_is(layout, not args.real):
        return
    if child.is_child():   # never loop
        _fail(prog, f"the neuron runtime did not start as {layout.instance} LNC={layout.lnc} "
                    f"{'dry run' if not args.real else 'real run'} even with its environment set")
    env = child.environment(plan_settings(args.instance, args.lnc, args.real, args.json))
    handed = progress.handover()   # the child's display goes on from this one's
    if handed:
        env[progress.STARTED_ENV] = handed
    raise child.RanInChild(child.run(args.argv(), env).returncode)


def dry_run_core():
    """The dry-run core (torch_neuronx.plan: phantom device memory), or None in a build without it."""
    try:
        from .. import enable
    except ImportError:
        return None
    return enable


def _prepare(args, prog: str):
    """Layout and config in the plan's own process, or exit 2 with the reason."""
    from ._config import ConfigError, load_config

    if not args.real and dry_run_core() is None:
        _fail(prog, "this build has no dry-run core (torch_neuronx.plan), so a plan would allocate every "
                    "byte on this host; pass --real to plan a small config for real")
    _ensure_runtime(args, args.layout, prog)   # before transformers loads: a child loads it anyway
    try:
        config = load_config(args.config)
    except ConfigError as err:
        _fail(prog, str(err))
    return args.layout, config


def _finish(report: dict, args, title: str, rows, collected=None) -> int:
    from ._report import markdown, write_json

    progress.stage("writing the report")
    if collected is not None:
        report["notes"] = collected.section(report["unmodelled_ops"], report.get("ops_by_name"))
    write_json(report, args.json)
    if args.html:
        from .._html_report import write as write_html

        write_html(report, args.html)
    progress.finish()
    print(markdown(report, title, rows))
    return 0 if report["fits"] else 1


@contextlib.contextmanager
def _start(args, command: str):
    """The progress display and the notes collection of one plan command. If the plan fails, the
    display closes and the collected notes are printed: they may say why."""
    in_child = child.is_child()   # a plan run again in a child goes on with the same clock and lines
    progress.start(command, quiet=args.quiet, handed=os.environ.get(progress.STARTED_ENV) if in_child else None)
    progress.stage("starting the plan's own process (instance, LNC, dry run)" if in_child
                   else "starting (torch, transformers, the layout)")
    collected = notes.collect(args.verbose)
    try:
        with collected:
            yield collected
    except (child.RanInChild, child.Interrupted):   # the child has shown and said it all
        raise
    except BaseException as err:
        progress.finish("stopped")
        if not isinstance(err, SystemExit) and collected.items and not collected.verbose:
            print("\n".join(["the plan stopped; what it collected until then:"] + notes.markdown(collected.section())[2:]),
                  file=sys.stderr)
        raise


def _fmt(v, unit="", scale=1.0, digits=4):
    from .._wording import number

    return "-" if v is None else f"{number(v * scale, digits)}{unit}"


def run_generate(args) -> int:
    """`plan generate`; `args` are its checked options (options.GenerateOptions)."""
    prog = "python -m torch_neuronx.plan generate"
    with _start(args, "generate") as collected:
        if args.mode == "deployed":
            finished = []
            run_deployed(args, prog, _prepare, lambda report, _args, title, rows: finished.append((report, title, rows)),
                         _fail, _fmt)
        else:
            layout, config = _prepare(args, prog)
            import torch

            from ._generate import plan_generate

            try:
                report = plan_generate(config, layout, batch=args.batch, input_tokens=args.input_tokens,
                                       output_tokens=args.output_tokens, dtype=getattr(torch, args.dtype),
                                       prefill_chunk_size=args.prefill_chunk_size, compile=args.compile,
                                       dry_run=not args.real, routing=args.routing)
            except (LayoutError, ValueError) as err:
                _fail(prog, str(err))
            report["mode"] = "compiled (decode step: torch.compile, backend neuron)" if args.compile else "eager"
    if args.mode == "deployed":
        report, title, rows = finished[0]
        return _finish(report, args, title, rows, collected)
    rows = [("TTFT", _fmt(report["ttft_ms"], " ms")), ("per output token", _fmt(report["tpot_ms"], " ms")),
            ("output tokens/s (one TP group)", _fmt(report["output_tokens_per_s"])),
            (f"output tokens/s ({plural(report['replicas'], 'replica')})",
             _fmt(report["output_tokens_per_s_all_replicas"]))]
    title = "generate (mode eager: Hugging Face generate()" + (", decode step compiled)" if args.compile else ")")
    return _finish(report, args, title, rows, collected)


def run_train(args) -> int:
    """`plan train`; `args` are its checked options (options.TrainOptions)."""
    prog = "python -m torch_neuronx.plan train"
    with _start(args, "train") as collected:
        layout, config = _prepare(args, prog)
        import torch

        from ._train import plan_train

        try:
            report = plan_train(config, layout, micro_batch=args.micro_batch, global_batch=args.global_batch,
                                seq_len=args.seq_len, dtype=getattr(torch, args.dtype),
                                gradient_checkpointing=args.gradient_checkpointing, dry_run=not args.real,
                                zero1=args.zero1, sequence_parallel=args.sequence_parallel, routing=args.routing)
        except (LayoutError, ValueError) as err:
            _fail(prog, str(err))
        report["mode"] = "eager"   # plan train runs the model's ops one by one
    rows = [("step time", _fmt(report["step_time_s"], " s")), ("tokens/s", _fmt(report["tokens_per_s"])),
            ("sequences/s", _fmt(report["sequences_per_s"])), ("MFU", _fmt(report["mfu"], "%", 100, 3)),
            ("gradient accumulation", plural(report["grad_accum_steps"], "micro-step")),
            ("FLOPs per core per step", _fmt(report.get("flops_per_core")))]
    if report.get("pipeline"):
        pipe = report["pipeline"]
        rows.append(("pipeline", f"{pipe['schedule']}, {pipe['stages']} stages x {pipe['chunks_per_stage']} chunks, "
                                 f"{pipe['microbatches']} micro-batches, bubble {pipe['bubble_fraction']:.1%}"))
    rows += train_layout_lines(report)
    return _finish(report, args, "train", rows, collected)
