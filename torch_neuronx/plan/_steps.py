"""The step clock of a dry run: one pair of optimizer-step hooks for everything that counts steps.

The report's step count and per-step time, the memory breakdown's phase ("optimizer") and step
number, and the distributed section's step ends all read this one clock instead of hooking
`optimizer.step()` each on their own.
"""
from __future__ import annotations

import contextlib
import weakref


class StepClock:
    """Optimizer steps between `start()` and `stop()`: how many finished, whether one runs now,
    which optimizers stepped, and the session estimate's device time at the end of each."""

    def __init__(self, estimate) -> None:
        self.estimate = estimate
        self.done = 0                    # optimizer.step() calls finished (any optimizer)
        self.in_optimizer = 0            # > 0 while an optimizer.step() runs
        self.optimizers: weakref.WeakSet = weakref.WeakSet()
        self.ends_s: list[float] = []    # the estimate's total_s at the end of each step
        self.listeners: list = []        # called with no argument after each step (progress display)
        self._handles: list = []

    def start(self) -> None:
        from torch.optim import optimizer as _optim

        self._handles = [_optim.register_optimizer_step_pre_hook(self._before),
                         _optim.register_optimizer_step_post_hook(self._after)]

    def stop(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def _before(self, opt, _args, _kwargs) -> None:
        self.optimizers.add(opt)
        self.in_optimizer += 1

    def _after(self, _opt, _args, _kwargs) -> None:
        self.in_optimizer = max(0, self.in_optimizer - 1)
        if self.in_optimizer == 0:   # an optimizer stepping inside another (ZeRO's inner AdamW) is one step
            self._end_step()

    @contextlib.contextmanager
    def one_step(self):
        """The steps of several optimizers inside count as one optimizer step (a model whose
        parameters need one AdamW per kind steps them all in one step of training)."""
        self.in_optimizer += 1
        try:
            yield
        finally:
            self.in_optimizer = max(0, self.in_optimizer - 1)
            if self.in_optimizer == 0:
                self._end_step()

    def _end_step(self) -> None:
        self.done += 1
        self.ends_s.append(self.estimate.total_s)
        for listener in list(self.listeners):
            listener()
