"""What every `python -m torch_neuronx.plan` command shares, in one place: its view flags, the
environment of the child it starts, its start / finish / fail, and the switch into a runtime that
is the plan's.

- `add_view_arguments`: --html, --quiet, -v (what the user sees while and after planning).
- `child_environment`: the one builder of a plan child's environment (`plan run`'s script, each
  rank of a distributed plan, each sweep row, a `train`/`generate` started outside its instance).
  The neuron runtime reads the instance type, the LNC and TORCH_NEURONX_DRY_RUN once, when it
  starts, so these are the settings a child is started with; _child.py starts and supervises it.
- `started` / `finish` / `fail`: the progress display and the notes of one command; the report
  written (--json, --html) and printed; a stop with the reason (exit status 2, as argparse).
- `ensure_runtime`: go on when this process's runtime is the plan's, else run the same command
  line again in a child with the plan's settings (its exit status becomes this command's).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys

from ..runtime import env as runtime_env
from . import _child as child, _dry_run_env as dry_run_env, _notes as notes, _progress as progress


def add_view_arguments(p: argparse.ArgumentParser) -> None:
    """What the user sees while and after planning (every plan command has these)."""
    p.add_argument("--html", metavar="OUT.html", help="also write the report as one self-contained HTML page")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress display")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="stream warnings and library messages as they happen (else they are collected "
                        "into the report's notes)")


# ---- the child's environment ---------------------------------------------------------------------
def child_environment(*, instance: str | None = None, lnc: int | None = None, dry_run: bool = True,
                      report: str | None = None, trace: str | None = None, view: tuple[bool, bool] | None = None,
                      one_process: bool = False, base: dict | None = None) -> dict:
    """The environment of a plan's child process: `base` (default: this process's) with

    - `instance`, `lnc`: the runtime's instance type and LNC (None: as this process has them);
    - `dry_run`: TORCH_NEURONX_DRY_RUN=1 (phantom memory from the first allocation), else removed;
    - `report`, `trace`: where the dry run writes its JSON report (None: as this process has it)
      and its estimated timeline at exit (None: no trace);
    - `view`: (quiet, verbose) for a child that shows the progress and collects the notes itself;
    - `one_process`: the child runs one rank's program on neuron:0 (model-level plans), so on an
      instance with more logical cores than one process can address it sees the first ones.
    """
    settings: dict = {}
    if instance:
        settings[runtime_env.INSTANCE_TYPE] = instance
    if lnc:
        settings[runtime_env.LOGICAL_NC_CONFIG] = str(lnc)
    if one_process and instance:
        settings.update(_addressable_cores(instance, lnc))
    settings[dry_run_env.DRY_RUN] = "1" if dry_run else None
    if dry_run and report:
        settings[dry_run_env.REPORT] = report
    settings[dry_run_env.TRACE] = trace or None
    if view is not None:
        quiet, verbose = view
        settings[progress.QUIET_ENV] = "1" if quiet else "0"
        settings[notes.VERBOSE_ENV] = "1" if verbose else "0"
    return child.environment(settings, base)


def report_beside(json_out: str | None) -> str | None:
    """Where a model-level plan's process writes its own dry-run report (host syncs, per-core
    breakdown): beside --json, else nowhere; a TORCH_NEURONX_DRY_RUN_REPORT the user set stays."""
    if dry_run_env.REPORT in os.environ:
        return None
    return f"{os.path.splitext(json_out)[0]}.dryrun.json" if json_out else os.devnull


def _addressable_cores(instance: str, lnc: int | None) -> dict:
    """An instance with more logical cores than one process can address (trn3.48xlarge at LNC=1:
    128) would stop the runtime, so the plan's process sees the first ones, as a torchrun worker is
    given a share (NEURON_RT_VISIBLE_CORES); a restriction the user set is kept."""
    from neuron_hardware.logical_core import HardwareChoiceError, logical_core_view

    from ..runtime.topology import MAX_VISIBLE_CORES

    if os.environ.get(runtime_env.VISIBLE_CORES) or os.environ.get("NEURON_RT_NUM_CORES"):
        return {}
    try:
        cores = logical_core_view(instance, lnc).cores_per_instance
    except HardwareChoiceError:   # an unknown instance or LNC: the layout check reports it with its fix
        return {}
    return {runtime_env.VISIBLE_CORES: f"0-{MAX_VISIBLE_CORES - 1}"} if cores > MAX_VISIBLE_CORES else {}


# ---- start, finish, fail -------------------------------------------------------------------------
def fail(prog: str, message: str):
    """Stop the command: the display closes, the reason is printed, exit status 2 (as argparse)."""
    progress.finish("stopped")
    print(f"{prog}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


@contextlib.contextmanager
def started(command: str, *, quiet: bool, verbose: bool):
    """The progress display and the notes collection of one plan command (yields the collection).
    If the plan fails, the display closes and the collected notes are printed: they may say why."""
    in_child = child.is_child()   # a plan run again in a child goes on with the same clock and lines
    progress.start(command, quiet=quiet, handed=os.environ.get(progress.STARTED_ENV) if in_child else None)
    progress.stage("starting the plan's own process (instance, LNC, dry run)" if in_child
                   else "starting (torch, transformers, the layout)")
    collected = notes.collect(verbose)
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


def finish(report, text: str, *, json_out: str | None = None, html: str | None = None, status: int = 0,
           write_json=None) -> int:
    """Write the report (--json: `write_json(report, path)` when the command stamps its own kind,
    else as it is; --html: one page), close the display, print `text`; returns `status`."""
    progress.stage("writing the report")
    if json_out:
        if write_json is not None:
            write_json(report, json_out)
        else:
            with open(json_out, "w") as f:
                json.dump(report, f, indent=1)
    if html:
        from ._html_report import write as write_html

        write_html(report, html)
    progress.finish()
    print(text)
    return status


# ---- the runtime switch --------------------------------------------------------------------------
def runtime_is(instance: str, lnc: int, dry_run: bool) -> bool:
    """Is this process's neuron runtime `instance` at `lnc`, with phantom memory iff `dry_run`?"""
    import torch

    from .. import _C

    props = torch.neuron.get_device_properties(0)
    return (props.instance_type == instance and props.physical_cores == lnc
            and bool(_C._allocator_phantom()) == dry_run)


def ensure_runtime(prog: str, argv: list[str], *, instance: str, lnc: int, dry_run: bool,
                   json_out: str | None) -> None:
    """Go on if this process's runtime is the plan's; else run `argv` (this command line) in a child
    with the plan's environment (the instance is fixed when torch starts): its exit status is this
    command's (child.RanInChild)."""
    if runtime_is(instance, lnc, dry_run):
        return
    if child.is_child():   # never loop
        fail(prog, f"the neuron runtime did not start as {instance} LNC={lnc} "
                   f"{'dry run' if dry_run else 'real run'} even with its environment set")
    env = child_environment(instance=instance, lnc=lnc, dry_run=dry_run,
                            report=report_beside(json_out) if dry_run else None, one_process=True)
    handed = progress.handover()   # the child's display goes on from this one's
    if handed:
        env[progress.STARTED_ENV] = handed
    raise child.RanInChild(child.run(argv, env).returncode)
