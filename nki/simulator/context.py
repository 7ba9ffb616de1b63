"""The state of one simulated kernel run (thread-local), and access to it."""
from __future__ import annotations

import threading

import numpy as np

from .. import _env
from ..errors import raise_error
from ..targets import TARGETS, Target
from .cost import CostModel
from .memory import PsumAllocator, SbufAllocator

_tls = threading.local()


class Run:
    """Everything one kernel launch needs: target, allocators, cost timelines, grid."""

    def __init__(self, target: Target, *, grid=(1,), compute=True, check_capacity=None,
                 precise=None, kernel_code=None, kernel_name=""):
        self.target = target
        self.grid = tuple(grid)
        self.program = (0,) * len(self.grid)
        self.compute = compute
        self.precise = _env.precise_fp() if precise is None else precise
        check = _env.check_capacity() if check_capacity is None else check_capacity
        self.sbuf = SbufAllocator(target.sbuf_partition_bytes, check, target.name)
        nbanks = 7 if _env.dma_transpose_as_pe() else target.psum_banks
        self.psum = PsumAllocator(nbanks, target.psum_bank_bytes, check)
        self.cost = CostModel(target)
        self.kernel_code = kernel_code
        self.kernel_name = kernel_name
        self.toplevel_lines = None      # lines of top-level statements in the kernel body
        self.shared_allocs = []         # shared_hbm storages, in allocation order
        self.shared_cursor = 0
        self.shared_sites = set()
        self.act_acc = np.zeros((128, 1), dtype=np.float32)   # ScalarE accumulators
        self.hbm_bytes = 0

    def start_program(self, pid: tuple) -> None:
        self.program = pid
        self.shared_cursor = 0
        self.shared_sites = set()


def current(api: str = "") -> Run:
    run = getattr(_tls, "run", None)
    if run is None:
        raise_error("err_nki_api_outside_of_nki_kernel",
                    f"{api or 'this API'} can only be used inside a running NKI kernel",
                    instruction=api or None)
    return run


def current_or_none() -> Run | None:
    return getattr(_tls, "run", None)


def current_target() -> Target:
    """The running kernel's target, else the default (``NEURON_PLATFORM_TARGET_OVERRIDE`` or trn2)."""
    run = current_or_none()
    return run.target if run is not None else TARGETS[_env.default_target()]


class activate:
    """Context manager making ``run`` the current run of this thread."""

    def __init__(self, run: Run):
        self.run = run

    def __enter__(self):
        self.prev = getattr(_tls, "run", None)
        _tls.run = self.run
        return self.run

    def __exit__(self, *exc):
        _tls.run = self.prev
        return False
