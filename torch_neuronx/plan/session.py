"""One dry run: the shape-only dispatch mode, the cost model's estimate, memory and host syncs.

`DryRun` is what `torch_neuronx.plan.dry_run()` returns and what TORCH_NEURONX_DRY_RUN=1 enters
for the whole process. The time comes from torch_neuronx.estimate (ops, compiled graphs,
collectives); this module only adds host syncs (assumption host_sync_s) and steps.
"""
from __future__ import annotations

import time

import torch

from ..compiler import hooks
from . import compiled, syncs as syncs_mod
from .fallbacks import FallbackSites
from .generation import GenerateCalls
from .memory import Memory

_active: list = []   # the DryRun sessions entered, innermost last


class DryRun:
    """Context manager and result of a dry run (see `torch_neuronx.plan.dry_run`)."""

    def __init__(self, instance: str | None = None, lnc: int | None = None, *,
                 assumptions: dict | None = None) -> None:
        from ..estimate import estimate
        from . import config

        self.large_bytes = config.large_bytes()   # settings first: a bad value changes nothing
        self.estimate = estimate(instance, lnc, assumptions=assumptions)
        self.memory = Memory()
        self.syncs = syncs_mod.HostSyncs()
        self.fallbacks = FallbackSites()   # CPU_FALLBACK / N ops per call site (plan/fallbacks.py)
        self.ops: dict[str, int] = {}
        self.optimizer_steps = 0
        self.generation = GenerateCalls(self.estimate, self.syncs)
        self._mode = None
        self._step_hook = None
        self._compile_override = None   # token of the compiler hook while the dry run is active
        self._metrics0: dict = {}
        self._t0 = 0.0
        self.wall_s = 0.0

    # ---- context ---------------------------------------------------------------------------
    def __enter__(self) -> "DryRun":
        from ..compiler import metrics
        from .mode import DryRunMode

        if self._mode is not None:
            raise RuntimeError("this dry run is already running; create a new torch_neuronx.plan.dry_run()")
        self._t0 = time.perf_counter()
        self._metrics0 = metrics.get_dynamo_metrics()
        self.memory.start()
        from torch.optim import optimizer as _optim

        self._step_hook = _optim.register_optimizer_step_post_hook(self._on_step)
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
        self._step_hook.remove()
        self.memory.stop()
        self.wall_s = time.perf_counter() - self._t0
        self._metrics1 = _compile_metrics()

    def _on_step(self, *_args) -> None:
        self.optimizer_steps += 1

    def count_op(self, func) -> None:
        name = func._schema.name
        self.ops[name] = self.ops.get(name, 0) + 1

    # ---- results -----------------------------------------------------------------------------
    def report(self) -> dict:
        """The report as a dict (schema: docs/plan.md)."""
        from .report import build

        if self._mode is not None:      # asked from inside (the at-exit report of a process)
            self.wall_s = time.perf_counter() - self._t0
            self._metrics1 = _compile_metrics()
        return build(self)

    def markdown(self) -> str:
        from .report import markdown

        return markdown(self.report())

    def write_json(self, path: str) -> None:
        import json

        with open(path, "w") as f:
            json.dump(self.report(), f, indent=1)

    def write_trace(self, path: str) -> None:
        from .report import chrome_trace

        chrome_trace(self, path)


def _compile_metrics() -> dict:
    from ..compiler import metrics

    return metrics.get_dynamo_metrics()


def active() -> DryRun | None:
    return _active[-1] if _active else None
