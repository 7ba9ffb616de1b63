"""One dry run: the shape-only dispatch mode, the cost model's estimate, memory and host syncs.

`DryRun` is what `torch_neuronx.plan.dry_run()` returns and what TORCH_NEURONX_DRY_RUN=1 enters
for the whole process. The time comes from torch_neuronx.estimate (ops, compiled graphs,
collectives); this module only adds host syncs (assumption host_sync_s) and steps.

A dry run is the one session of its process: one step clock (_steps.py), one wrapper of
`generate()` (_generation.py) and named regions. A region (`run.region(name, estimate)`, what a
model-level plan times: plan/models/_measure.py) is an estimate entered inside the dry run's
own: each op is costed once and the cost goes to both (torch_neuronx.estimate.recorders), the
region laying it out on its own clock from zero; `generate()` calls made inside a region are
timed on the region's estimate.
"""
from __future__ import annotations

import contextlib
import time

import torch

from ..compiler import hooks
from . import compiled, _syncs as syncs_mod
from ._fallbacks import FallbackSites
from ._generation import GenerateCalls
from ._memory import Memory
from ._steps import StepClock

_active: list = []   # the DryRun sessions entered, innermost last


class DryRun:
    """Context manager and result of a dry run (see `torch_neuronx.plan.dry_run`)."""

    def __init__(self, instance: str | None = None, lnc: int | None = None, *,
                 assumptions: dict | None = None) -> None:
        from ..estimate import estimate
        from . import _dry_run_env as config

        self.large_bytes = config.large_bytes()   # settings first: a bad value changes nothing
        self.estimate = estimate(instance, lnc, assumptions=assumptions)
        self.steps = StepClock(self.estimate)   # the one optimizer-step hook of the dry run
        self.memory = Memory(self.steps)
        self.syncs = syncs_mod.HostSyncs()
        self.fallbacks = FallbackSites()   # CPU_FALLBACK / N ops per call site (plan/_fallbacks.py)
        self.ops: dict[str, int] = {}
        self.regions: dict = {}            # name -> the estimate of a region timed inside (region())
        self._timing: list = []            # regions being timed now, innermost last
        self.generation = GenerateCalls(self.estimate, self.syncs, timing=self._generate_timing)
        self._mode = None
        self._compile_override = None   # token of the compiler hook while the dry run is active
        self._metrics0: dict = {}
        self._compile_log0 = 0          # records of the compile log before the dry run (its compile budget)
        self._t0 = 0.0
        self.wall_s = 0.0

    # ---- context ---------------------------------------------------------------------------
    def __enter__(self) -> "DryRun":
        from .. import compiler as metrics
        from ._mode import DryRunMode

        if self._mode is not None:
            raise RuntimeError("this dry run is already running; create a new torch_neuronx.plan.dry_run()")
        self._t0 = time.perf_counter()
        self._metrics0 = metrics.get_dynamo_metrics()
        from ..compiler import compiled_graph_count

        self._compile_log0 = compiled_graph_count()
        self.memory.start()
        self.steps.start()
        self._mode = DryRunMode(self)
        self._mode.__enter__()          # below the estimate's mode, which must see our outputs
        self.estimate.__enter__()
        self.generation.start()
        _active.append(self)
        self._compile_override = hooks.compile_overrides.push(compiled.compile_override(self.large_bytes))
        return self

    def __exit__(self, *exc) -> None:
        if self._mode is None:
            return
        hooks.compile_overrides.remove(self._compile_override)   # compiled graphs: real programs again
        if _active and _active[-1] is self:
            _active.pop()
        self.generation.stop()
        self.estimate.__exit__(*exc)
        self._mode.__exit__(*exc)
        self._mode = None
        self.steps.stop()
        self.memory.stop()
        self.wall_s = time.perf_counter() - self._t0
        self._metrics1 = _compile_metrics()

    @property
    def optimizer_steps(self) -> int:
        return self.steps.done

    # ---- named regions ---------------------------------------------------------------------
    @contextlib.contextmanager
    def region(self, name: str, est):
        """Time the code inside on `est` (a fresh torch_neuronx.estimate) as the region `name`:
        `est` receives the same costs as this dry run's estimate, on a clock of its own."""
        if self._mode is None:
            raise RuntimeError(f"region {name!r}: this dry run is not running; enter it first")
        self.regions[name] = est
        self._timing.append(est)
        try:
            with est:
                yield est
        finally:
            self._timing.remove(est)

    def _generate_timing(self) -> tuple:
        """(estimate, host syncs) a generate() call is timed on: the region timed now (its own
        figures leave host syncs out, as every region figure does), else the whole dry run's."""
        return (self._timing[-1], None) if self._timing else (self.estimate, self.syncs)

    def count_op(self, func) -> None:
        name = func._schema.name
        self.ops[name] = self.ops.get(name, 0) + 1

    # ---- results -----------------------------------------------------------------------------
    def report(self) -> dict:
        """The report as a dict (schema: docs/plan.md)."""
        from ._report import build

        if self._mode is not None:      # asked from inside (the at-exit report of a process)
            self.wall_s = time.perf_counter() - self._t0
            self._metrics1 = _compile_metrics()
        return build(self)

    def markdown(self) -> str:
        from ._report import markdown

        return markdown(self.report())

    def write_json(self, path: str) -> None:
        import json

        with open(path, "w") as f:
            json.dump(self.report(), f, indent=1)

    def write_trace(self, path: str) -> None:
        from ._report import chrome_trace

        chrome_trace(self, path)


def _compile_metrics() -> dict:
    from .. import compiler as metrics

    return metrics.get_dynamo_metrics()


def active() -> DryRun | None:
    return _active[-1] if _active else None
