"""`python -m torch_neuronx.plan run [options] -- script.py args...`: one dry run of a script.

The script runs in a child process started with TORCH_NEURONX_DRY_RUN=1 (phantom memory must be
chosen before the first neuron allocation, and the instance's HBM per core at startup); the child
writes the JSON report at exit, and this process prints its markdown.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from . import config, notes, progress
from .distributed import launch


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--instance", default=None, help="instance type, e.g. trn2.48xlarge (default: "
                   "TORCH_NEURONX_INSTANCE_TYPE or the runtime's default)")
    p.add_argument("--lnc", type=int, choices=(1, 2), default=None, help="logical NeuronCore size")
    p.add_argument("--json", dest="json_out", default=None, metavar="OUT.json", help="write the report as JSON")
    p.add_argument("--trace", default=None, metavar="OUT.json", help="write the estimated device timeline "
                   "(Chrome/Perfetto trace)")
    from .models.cli import add_view_arguments   # --html, --quiet, -v (every plan command)

    add_view_arguments(p)
    p.add_argument("script", nargs=argparse.REMAINDER, help="-- script.py args...")
    launch.add_arguments(p)   # --nproc-per-node, --nnodes, --all-ranks, ... (plan/distributed/launch.py)


def child_env(instance: str | None, lnc: int | None, report: str, trace: str | None,
              extra: dict | None = None) -> dict:
    """The environment of a dry-run child (p2's per-rank launcher starts the same child)."""
    from ..runtime import env as rt_env

    e = dict(os.environ)
    e[config.DRY_RUN] = "1"
    e[config.REPORT] = report
    if trace:
        e[config.TRACE] = trace
    else:
        e.pop(config.TRACE, None)
    if instance:
        e[rt_env.INSTANCE_TYPE] = instance
    if lnc:
        e[rt_env.LOGICAL_NC_CONFIG] = str(lnc)
    e.update(extra or {})
    return e


def run_script(script: list[str], *, instance: str | None = None, lnc: int | None = None,
               trace: str | None = None, extra_env: dict | None = None) -> tuple[int, dict | None]:
    """Dry-run `script` (path and arguments) in a child; (exit status, report dict or None)."""
    with tempfile.TemporaryDirectory(prefix="neuron-plan-") as tmp:
        report = os.path.join(tmp, "report.json")
        cmd = [sys.executable, "-m", "torch_neuronx.plan._exec", *script]
        rc = subprocess.call(cmd, env=child_env(instance, lnc, report, trace, extra_env))
        if not os.path.exists(report):
            return rc, None
        with open(report) as f:
            return rc, json.load(f)


def main(args: argparse.Namespace) -> int:
    from .report import markdown

    script = list(args.script)
    if script and script[0] == "--":
        script = script[1:]
    if not script:
        print("plan run: name the script to plan: python -m torch_neuronx.plan run [options] -- script.py args...",
              file=sys.stderr)
        return 2
    if not os.path.isfile(script[0]):
        print(f"plan run: script {script[0]!r} does not exist", file=sys.stderr)
        return 2
    # the child shows the progress and collects the warnings (it runs the script): tell it how
    view = {progress.QUIET_ENV: "1" if args.quiet else "0", notes.VERBOSE_ENV: "1" if args.verbose else "0"}
    if launch.requested(args):   # one process per rank role, merged (plan/distributed/launch.py)
        saved = {k: os.environ.get(k) for k in view}
        os.environ.update(view)       # the ranks' environments start from this one
        try:
            return launch.main(args, script)
        finally:
            for k, v in saved.items():
                os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    rc, report = run_script(script, instance=args.instance, lnc=args.lnc, trace=args.trace, extra_env=view)
    if report is None:
        print(f"plan run: the script exited with status {rc} before a report was written", file=sys.stderr)
        return rc or 1
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(report, f, indent=1)
    if args.html:
        from .html_report import write as write_html

        write_html(report, args.html)
    print(markdown(report))
    return rc
