"""Plan before you rent: run a real script at full size with phantom device memory (a dry run).

    python -m torch_neuronx.plan run [--instance trn2.48xlarge] [--lnc N] [--json OUT] [--trace OUT]
        -- script.py args...
    TORCH_NEURONX_DRY_RUN=1 python script.py        # under any launcher; report at exit
    with torch_neuronx.plan.dry_run() as run: ...   # in-process; run.report(), run.markdown()

Neuron tensors keep their shapes, dtypes, strides and devices and the caching allocator charges
their bytes (and raises its torch.OutOfMemoryError) exactly as in a real run, while no host memory
backs them and large ops compute only shapes. See docs/plan.md.

Layout: _dry_run_env.py (its environment variables), _mode.py (the shape-only dispatch mode), _syncs.py (host reads),
_memory.py (per-core peak and breakdown), _steps.py (the step clock), _session.py (DryRun: the one
session, with named regions), _report.py (JSON, markdown, trace), _run.py (`plan run`), _command.py
(what every command shares: view flags, the one child environment, start/finish/fail, the runtime
switch), _child.py (child processes), __main__.py (the subcommand table); distributed/ and models/
add multi-rank launching and model-level commands; calibrate.py (`python -m
torch_neuronx.plan.calibrate`) compares the plans with published Trainium results.
"""
from __future__ import annotations

import atexit
import os
import sys

from . import _dry_run_env as config
from ._mode import DryRunError
from ._session import DryRun, active

from ._compile_budget import report_at_exit as compile_only_report_at_exit

__all__ = ["DryRun", "DryRunError", "dry_run", "enable", "install", "is_active", "active",
           "compile_only_report_at_exit"]

_process_run: list = []   # the DryRun TORCH_NEURONX_DRY_RUN=1 entered for the whole process


def dry_run(instance: str | None = None, lnc: int | None = None, *, assumptions: dict | None = None) -> DryRun:
    """A dry run of the code inside `with` (phantom memory only when the process was started with
    TORCH_NEURONX_DRY_RUN=1 or `enable()`d before its first neuron allocation; otherwise the same
    shape-only ops run on real device memory, which is how the tests compare both).

    Args:
        instance: instance type of the estimate, e.g. "trn2.48xlarge" (default
            TORCH_NEURONX_INSTANCE_TYPE). The HBM capacity is the process's (set at startup).
        lnc: logical core size of the estimate.
        assumptions: overrides of the cost model's named assumptions.
    """
    return DryRun(instance, lnc, assumptions=assumptions)


def is_active() -> bool:
    """True inside a dry run (a script can skip work that needs real values)."""
    return active() is not None


def enable() -> DryRun:
    """Make this whole process a dry run, as TORCH_NEURONX_DRY_RUN=1 does; call it before the
    first neuron allocation. The report is written at exit (TORCH_NEURONX_DRY_RUN_REPORT, else
    printed to stderr)."""
    from .. import _C

    if _process_run:
        return _process_run[0]
    previous = os.environ.get(config.DRY_RUN)
    os.environ[config.DRY_RUN] = "1"
    if not _C._allocator_phantom():   # latched at the first segment: too late for phantom memory
        if previous is None:
            del os.environ[config.DRY_RUN]
        else:
            os.environ[config.DRY_RUN] = previous
        raise DryRunError(
            "torch_neuronx.plan.enable() was called after the first neuron allocation, so device memory "
            "is already real. Set TORCH_NEURONX_DRY_RUN=1 in the environment, or call enable() before "
            "creating any neuron tensor.")
    run = DryRun()
    run.__enter__()                   # never exited: lasts as long as the process
    _process_run.append(run)
    atexit.register(_report_at_exit, run)
    return run


def install() -> None:
    """At startup (registration): TORCH_NEURONX_DRY_RUN=1 makes the process a dry run."""
    try:
        on = config.requested()
    except Exception as err:  # noqa: BLE001 - registration must not fail; the message names the fix
        import warnings

        warnings.warn(f"{err} Running for real.", RuntimeWarning, stacklevel=2)
        return
    if on:
        enable()


def _report_at_exit(run: DryRun) -> None:
    from . import _progress as progress

    progress.stage("writing the report")   # shown only under a plan command's display
    try:
        data = run.report()
        path = config.report_path()
        if path:
            import json

            with open(path, "w") as f:
                json.dump(data, f, indent=1)
        else:
            from ._report import markdown

            print(markdown(data), file=sys.stderr)
        trace = config.trace_path()
        if trace:
            run.write_trace(trace)
    except Exception as err:  # noqa: BLE001 - at exit: say why there is no report
        print(f"torch_neuronx.plan: could not write the dry-run report ({type(err).__name__}: {err})",
              file=sys.stderr)
    progress.finish()
