"""`plan sweep`: one training plan per layout, one table row each, so a user can pick a layout.

Every combination of the lists (instance, LNC, TP, CP, FSDP, micro-batch, sequence length, gradient
checkpointing) is checked first; a layout that cannot work gets its reason in the row and costs
nothing. Each possible one runs `python -m torch_neuronx.plan train` in its own process, started with
the row's instance, LNC and dry run in its environment (plan/_command.py `child_environment`: the
runtime reads them when it starts).
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import tempfile

from .. import _child as child, _command as command, _progress as progress
from ._layout import LayoutError, check_batch, check_model, make_layout


def _ints(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _names(text: str) -> list[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, help="a transformers config.json (or its folder)")
    p.add_argument("--instances", type=_names, default=["trn2.48xlarge", "trn3.48xlarge"])
    p.add_argument("--lnc", type=_ints, default=[2], help="e.g. 1,2")
    p.add_argument("--nodes", type=int, default=1)
    p.add_argument("--tp", type=_ints, default=[8], help="e.g. 4,8,16")
    p.add_argument("--cp", type=_ints, default=[1], help="context parallelism, e.g. 1,4 (FSDP shards over FSDP x CP)")
    p.add_argument("--fsdp", type=_ints, default=[1], help="e.g. 1,8 (DP fills the cores left)")
    p.add_argument("--micro-batch", type=_ints, default=[1])
    p.add_argument("--global-batch", type=int, default=None)
    p.add_argument("--seq-len", type=_ints, default=[2048])
    p.add_argument("--gradient-checkpointing", type=_ints, default=[0], help="0,1: without and with")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--real", action="store_true", help="run each plan for real (tiny configs)")
    p.add_argument("--in-process", action="store_true",
                   help="plan every row in this process (cheaper; all rows must share one instance and LNC)")
    p.add_argument("--row-timeout", type=float, default=900.0, help="seconds per layout")
    p.add_argument("--json", help="write the rows here")
    command.add_view_arguments(p)   # --html (one sortable row per layout), --quiet, -v


def layouts(args, config):
    """(settings, layout or None, reason or None) for every combination, in order."""
    from ._context_parallel import check as check_context_parallel

    for inst, lnc, tp, cp, fsdp, mb, seq, ckpt in itertools.product(
            args.instances, args.lnc, args.tp, args.cp, args.fsdp, args.micro_batch, args.seq_len,
            args.gradient_checkpointing):
        settings = {"instance": inst, "lnc": lnc, "tp": tp, "cp": cp, "fsdp": fsdp, "micro_batch": mb, "seq_len": seq,
                    "gradient_checkpointing": bool(ckpt)}
        try:
            layout = make_layout(inst, lnc, args.nodes, tp, fsdp, cp=cp)
            check_model(layout, config)
            check_batch(layout, mb, args.global_batch)
            check_context_parallel(layout, seq, zero1=False)
        except (LayoutError, ValueError) as err:
            yield settings, None, str(err)
            continue
        yield settings, layout, None


def _run_row_here(args, settings, layout, config) -> dict:
    """The row's plan in this process; the runtime must be (or become) the row's instance and LNC."""
    import torch

    from ._train import plan_train

    try:
        return plan_train(config, layout, micro_batch=settings["micro_batch"], global_batch=args.global_batch,
                          seq_len=settings["seq_len"], dtype=getattr(torch, args.dtype),
                          gradient_checkpointing=settings["gradient_checkpointing"], dry_run=not args.real)
    except (RuntimeError, ValueError) as err:
        return {"error": str(err)}


def _run_row(args, settings, layout) -> dict:
    """The row's plan: `plan train` in a child started with the row's runtime settings."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "plan.json")
        cmd = ["train", "--config", args.config,
               "--instance", layout.instance, "--lnc", str(layout.lnc), "--nodes", str(layout.nodes),
               "--tp", str(layout.tp), "--cp", str(layout.cp), "--fsdp", str(layout.fsdp), "--dp", str(layout.dp),
               "--micro-batch", str(settings["micro_batch"]), "--seq-len", str(settings["seq_len"]),
               "--dtype", args.dtype, "--json", out, "--quiet"]
        if args.global_batch:
            cmd += ["--global-batch", str(args.global_batch)]
        if settings["gradient_checkpointing"]:
            cmd.append("--gradient-checkpointing")
        if args.real:
            cmd.append("--real")
        env = command.child_environment(instance=layout.instance, lnc=layout.lnc, dry_run=not args.real,
                                        report=command.report_beside(out), one_process=True)
        result = child.run(cmd, env, timeout=args.row_timeout, capture=True)
        if result.timed_out:
            return {"error": f"plan did not finish in --row-timeout {args.row_timeout:g} s"}
        if os.path.exists(out):
            with open(out) as f:
                return json.load(f)
        tail = ("".join(result.stderr_tail) or "".join(result.stdout_tail)).strip().splitlines()
        return {"error": tail[-1] if tail else f"plan exited with {result.returncode}"}


def _gib(n):
    return "-" if n is None else f"{n / (1 << 30):.2f}"


def _g(v, scale=1.0):
    from .._wording import number

    return "-" if v is None else number(v * scale)


def table(rows: list[dict]) -> str:
    head = ("| instance | LNC | TP | CP | FSDP | DP | micro | seq | ckpt | fits | peak HBM/core GiB | step s | "
            "tokens/s | MFU % | note |")
    lines = [head, "|" + "---|" * 15]
    for r in rows:
        note = r.get("reason") or r.get("error") or (r.get("oom") or "")[:120]
        fits = "-" if "fits" not in r else ("yes" if r["fits"] else "NO")
        lines.append(f"| {r['instance']} | {r['lnc']} | {r['tp']} | {r.get('cp', 1)} | {r['fsdp']} | {r.get('dp', '-')} | "
                     f"{r['micro_batch']} | {r['seq_len']} | {'yes' if r['gradient_checkpointing'] else 'no'} | "
                     f"{fits} | {_gib(r.get('peak_hbm_bytes_per_core'))} | {_g(r.get('step_time_s'))} | "
                     f"{_g(r.get('tokens_per_s'))} | {_g(r.get('mfu'), 100)} | {note} |")
    return "\n".join(lines)


KEEP = ("dp", "fits", "peak_hbm_bytes_per_core", "hbm_capacity_bytes_per_core", "step_time_s", "tokens_per_s",
        "sequences_per_s", "mfu", "oom", "error", "global_batch", "grad_accum_steps")


def main(args) -> int:
    """`python -m torch_neuronx.plan sweep`; `args` are its options (options.SweepOptions)."""
    from ._load_config import ConfigError, load_config

    prog = "python -m torch_neuronx.plan sweep"
    try:
        config = load_config(args.config)
    except ConfigError as err:
        command.fail(prog, str(err))
    if not args.real and args.in_process:
        from .. import DryRunError, enable

        try:
            enable()   # phantom memory needs this before the first neuron allocation
        except DryRunError as err:
            command.fail(prog, f"--in-process: {err}")
    rows = []
    todo = list(layouts(args, config))
    progress.start("sweep", quiet=args.quiet)
    progress.stage("planning layouts", total=sum(1 for _, layout, _ in todo if layout is not None), unit="layout")
    planned, possible = 0, sum(1 for _, layout, _ in todo if layout is not None)
    for settings, layout, reason in todo:
        row = dict(settings)
        if layout is None:
            row["reason"] = reason
        else:
            if args.in_process:   # the row's own stages show under its name
                progress.within(f"layout {planned + 1} of {possible} ({layout.describe()})")
            result = (_run_row_here(args, settings, layout, config) if args.in_process
                      else _run_row(args, settings, layout))
            row.update({k: result[k] for k in KEEP if k in result})
            planned += 1
            if args.in_process:
                progress.within("")
                progress.stage(f"planning layouts ({planned} done)", total=possible, unit="layout")
            progress.update(planned)
        rows.append(row)
    return command.finish(rows, table(rows), json_out=args.json, html=args.html)
