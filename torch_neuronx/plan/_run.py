"""`python -m torch_neuronx.plan run [options] -- script.py args...`: one dry run of a script.

The script runs in a child process (this command again, started with _command.py's child
environment: TORCH_NEURONX_DRY_RUN=1, since phantom memory must be chosen before the first neuron
allocation and the instance's HBM per core at startup); the child writes the JSON report at exit,
and this process prints its markdown.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from . import _child as child, _command as command, _notes as notes, _progress as progress
from .distributed import _launch as launch


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--instance", default=None, help="instance type, e.g. trn2.48xlarge (default: "
                   "TORCH_NEURONX_INSTANCE_TYPE or the runtime's default)")
    p.add_argument("--lnc", type=int, choices=(1, 2), default=None, help="logical NeuronCore size")
    p.add_argument("--json", dest="json_out", default=None, metavar="OUT.json", help="write the report as JSON")
    p.add_argument("--trace", default=None, metavar="OUT.json", help="write the estimated device timeline "
                   "(Chrome/Perfetto trace)")
    command.add_view_arguments(p)   # --html, --quiet, -v (every plan command)
    p.add_argument("script", nargs=argparse.REMAINDER, help="-- script.py args...")
    launch.add_arguments(p)   # --nproc-per-node, --nnodes, --all-ranks, ... (plan/distributed/_launch.py)


def run_script(script: list[str], *, instance: str | None = None, lnc: int | None = None,
               trace: str | None = None, view: tuple[bool, bool] | None = None) -> tuple[int, dict | None]:
    """Dry-run `script` (path and arguments) in a child; (exit status, report dict or None).
    `view`: (quiet, verbose) of the child, which shows the progress and collects the notes."""
    with tempfile.TemporaryDirectory(prefix="neuron-plan-") as tmp:
        report = os.path.join(tmp, "report.json")
        env = command.child_environment(instance=instance, lnc=lnc, report=report, trace=trace, view=view)
        rc = child.run(["run", "--", *script], env).returncode
        if not os.path.exists(report):
            return rc, None
        with open(report) as f:
            return rc, json.load(f)


def run_here(argv: list[str]) -> int:
    """The child's part: run the script in this process, a dry run since it started (its
    environment has TORCH_NEURONX_DRY_RUN=1; the report is written at exit).

    A script that stops at an allocation that does not fit ends here with exit status 0: the report
    says where and why, which is the answer the user asked for."""
    import runpy

    import torch   # this process runs `python -m torch_neuronx.plan`: the package and its registration
    #                (which enters the dry run) loaded before this module

    from . import active

    if active() is None:
        print("plan run: the dry run did not start in the script's process even with TORCH_NEURONX_DRY_RUN=1 "
              "set; refusing to run the script for real", file=sys.stderr)
        return 2
    sys.argv = list(argv)
    progress.start("run")   # TORCH_NEURONX_PLAN_QUIET=1 (plan run --quiet) shows nothing
    progress.stage(f"running {os.path.basename(argv[0])}")
    clock = active().steps   # the dry run's step clock: its one optimizer-step hook

    def watch() -> None:
        progress.count("optimizer step")

    clock.listeners.append(watch)
    try:
        with notes.collect():   # into the at-exit report's notes (plan run -v streams them too)
            runpy.run_path(argv[0], run_name="__main__")
    except torch.OutOfMemoryError as err:
        run = active()
        if run is None or run.memory.oom is None:
            raise
        print(f"torch_neuronx.plan: the script stopped at an allocation that does not fit "
              f"({run.memory.oom['site']}): {str(err).splitlines()[0]}", file=sys.stderr)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        clock.listeners.remove(watch)
    return 0


def main(args: argparse.Namespace) -> int:
    from ._report import markdown

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
    if child.is_child():   # the process plan run (or its rank launcher) started for the script
        return run_here(script)
    # the child shows the progress and collects the warnings (it runs the script): tell it how
    view = (args.quiet, args.verbose)
    if launch.requested(args):   # one process per rank role, merged (plan/distributed/_launch.py)
        return launch.main(args, script, view=view)
    rc, report = run_script(script, instance=args.instance, lnc=args.lnc, trace=args.trace, view=view)
    if report is None:
        print(f"plan run: the script exited with status {rc} before a report was written", file=sys.stderr)
        return rc or 1
    return command.finish(report, markdown(report), json_out=args.json_out, html=args.html, status=rc)
