"""Work handles returned by ProcessGroupNeuron.

A handle wraps the gloo work (or several, for coalesced calls) that moves the
bytes, plus an optional `finish` step that completes the result in place once
the bytes have arrived (the division of ReduceOp.AVG, the scale of PREMUL_SUM,
scattering a flat all_to_all buffer back into a list). `finish` runs exactly
once, from `wait()`, `is_completed()` or the future's callback, whichever comes
first. The future yields the caller's (neuron) tensors, so DDP's reducer and
comm hooks keep device tensors.
"""
from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any, Callable, Sequence

import torch
import torch.distributed as dist

_NO_TIMEOUT = timedelta(0)


class NeuronWork(dist.Work):
    def __init__(self, works: Sequence[Any], result: Any = None,
                 finish: Callable[[], None] | None = None):
        super().__init__()
        self._works = works
        self._result = result
        self._finish = finish
        self._lock = threading.Lock() if finish is not None else None
        self._future = None

    # ---- completion -------------------------------------------------------
    def _run_finish(self) -> None:
        if self._finish is None:
            return
        with self._lock:
            finish, self._finish = self._finish, None
            if finish is not None:
                finish()

    def wait(self, timeout: timedelta = _NO_TIMEOUT) -> bool:
        for w in self._works:
            w.wait(timeout)
        self._run_finish()
        return True

    def synchronize(self) -> None:
        self.wait()

    def is_completed(self) -> bool:
        if not all(w.is_completed() for w in self._works):
            return False
        if self._finish is not None and self.exception() is None:
            self._run_finish()
        return True

    def is_success(self) -> bool:
        return self.is_completed() and self.exception() is None

    def exception(self):
        for w in self._works:
            err = w.exception()
            if err is not None:
                return err
        return None

    def source_rank(self) -> int:
        return self._works[-1].source_rank()

    def result(self) -> list[torch.Tensor]:
        self.wait()
        if self._result is None:
            return []
        return list(self._result)

    # ---- futures ----------------------------------------------------------
    def _on_done(self, fut: torch.futures.Future):
        value = fut.value()  # re-raises a failure of the transport
        self._run_finish()
        return value if self._result is None else self._result

    def get_future(self) -> torch.futures.Future:
        if self._future is None:
            if len(self._works) == 1:
                base = self._works[0].get_future()
            else:
                base = torch.futures.collect_all([w.get_future() for w in self._works])
            self._future = base.then(self._on_done)
        return self._future

    def get_future_result(self) -> torch.futures.Future:
        return self.get_future()

