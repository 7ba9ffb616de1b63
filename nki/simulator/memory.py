"""Storage for simulated tensors, and SBUF / PSUM capacity accounting.

Each tensor allocation gets its own numpy array (like NKI's simulator); on top
of that the allocators below account what real hardware would hold:
SBUF bytes per partition (with the partition-start rule) and PSUM banks.
Tensors are freed when the last Python reference to their storage goes away,
which in straight-line kernel code matches the lifetime the compiler sees.
"""
from __future__ import annotations

import itertools
import weakref

import numpy as np

from ..errors import raise_error
from .._core import dtypes as dt

_ids = itertools.count(1)
INT_SENTINEL = 4


class AccessLog:
    """Recent accesses to one storage, as (row box, column box, done time, is_write)."""

    __slots__ = ("a", "n", "floor")
    CAP = 2048

    def __init__(self):
        self.a = np.zeros((16, 6))
        self.n = 0
        self.floor = 0.0

    def ready(self, box, for_write: bool) -> float:
        if self.n == 0:
            return self.floor
        a = self.a[: self.n]
        r0, r1, c0, c1 = box
        m = (a[:, 0] <= r1) & (a[:, 1] >= r0) & (a[:, 2] <= c1) & (a[:, 3] >= c0)
        if not for_write:
            m &= a[:, 5] > 0
        if not m.any():
            return self.floor
        return max(self.floor, float(a[m, 4].max()))

    def add(self, box, t: float, is_write: bool) -> None:
        if self.n == len(self.a):
            if self.n >= self.CAP:
                half = self.n // 2
                self.floor = max(self.floor, float(self.a[:half, 4].max()))
                self.a[: self.n - half] = self.a[half: self.n]
                self.n -= half
            else:
                self.a = np.concatenate([self.a, np.zeros_like(self.a)])
        self.a[self.n] = (*box, t, 1.0 if is_write else 0.0)
        self.n += 1


class Storage:
    """The backing array of one allocation (HBM, SBUF or PSUM)."""

    __slots__ = ("id", "dtype", "np_dtype", "data", "flat", "buffer", "name", "shape",
                 "row", "param_name", "is_input", "mutable", "written", "mm_init",
                 "log", "alloc", "__weakref__")

    def __init__(self, shape, dtype, buffer, name="", *, precise=True, fill=True, data=None):
        self.id = next(_ids)
        self.dtype = np.dtype(dtype)
        self.np_dtype = dt.storage_dtype(dtype, precise)
        self.shape = tuple(int(s) for s in shape)
        if data is None:
            data = np.empty(self.shape, self.np_dtype)
            if fill:
                data.fill(np.nan if dt.is_float(self.dtype) else
                          (INT_SENTINEL if self.dtype != dt.bool_ else True))
        self.data = data
        self.flat = data.reshape(-1)
        self.buffer = buffer
        self.name = name
        self.row = int(np.prod(self.shape[1:], dtype=np.int64)) if len(self.shape) > 1 else 1
        self.param_name = None
        self.is_input = False
        self.mutable = False
        self.written = False
        self.mm_init = None      # PSUM: bool mask "last written by a matmul"
        self.log = AccessLog()
        self.alloc = None

    @property
    def size(self) -> int:
        return self.flat.size

    def __repr__(self):
        return f"<Storage {self.name or self.id} {self.buffer.name} {self.shape} {dt.name_of(self.dtype)}>"


class SbufAllocator:
    """Bytes in use per SBUF partition; enforces the target's per-partition capacity."""

    def __init__(self, partition_bytes: int, check: bool, target_name: str):
        self.cap = partition_bytes
        self.check = check
        self.target_name = target_name
        self.used = np.zeros(128, dtype=np.int64)
        self.peak = 0
        self.live = 0

    def allocate(self, storage: Storage, nparts: int, nbytes: int) -> None:
        nbytes = -(-nbytes // 4) * 4
        starts = (0,) if nparts > 64 else (0, 64) if nparts > 32 else (0, 32, 64, 96)
        best = min(starts, key=lambda s: int(self.used[s:s + nparts].max()))
        now = int(self.used[best:best + nparts].max())
        if self.check and now + nbytes > self.cap:
            raise_error(
                "err_sbuf_out_of_memory",
                f"allocating {storage.name or 'tensor'} {list(storage.shape)} "
                f"{dt.name_of(storage.dtype)} needs {nbytes} bytes on each of partitions "
                f"{best}..{best + nparts - 1}, but live SBUF tensors already use {now} of "
                f"{self.cap} bytes per partition on {self.target_name}",
                instruction="nl.ndarray", operand=storage.name or None)
        self.used[best:best + nparts] += nbytes
        self.live += 1
        self.peak = max(self.peak, int(self.used.max()))
        storage.alloc = ("sbuf", best, nparts, nbytes)
        weakref.finalize(storage, self._release, best, nparts, nbytes)

    def _release(self, start, nparts, nbytes):
        self.used[start:start + nparts] -= nbytes
        self.live -= 1


class PsumAllocator:
    """PSUM banks (8 x 2 KiB per partition); every PSUM tensor starts on a bank boundary."""

    def __init__(self, nbanks: int, bank_bytes: int, check: bool):
        self.nbanks = nbanks
        self.bank_bytes = bank_bytes
        self.check = check
        self.free = [True] * nbanks
        self.peak = 0
        self.extra = 0  # banks over the limit when checks are off

    def allocate(self, storage: Storage, nbytes: int) -> None:
        need = max(1, -(-nbytes // self.bank_bytes))
        if need > self.nbanks:
            raise_error(
                "err_size_of_dimension_exceed_arch_limit",
                f"PSUM tensor {storage.name or ''} {list(storage.shape)} needs {nbytes} bytes per "
                f"partition; a PSUM partition holds {self.nbanks * self.bank_bytes} bytes",
                instruction="nl.ndarray", operand=storage.name or None)
        first = None
        for b in range(self.nbanks - need + 1):
            if all(self.free[b:b + need]):
                first = b
                break
        if first is None:
            if self.check:
                used = self.nbanks - sum(self.free)
                raise_error(
                    "err_psum_out_of_banks",
                    f"allocating PSUM tensor {storage.name or ''} {list(storage.shape)} needs {need} "
                    f"free bank(s) of {self.bank_bytes} bytes but {used} of {self.nbanks} banks "
                    f"are held by live PSUM tensors",
                    instruction="nl.ndarray", operand=storage.name or None)
            self.extra += need
            storage.alloc = ("psum", -1, need)
            self.peak = max(self.peak, self.nbanks - sum(self.free) + self.extra)
            weakref.finalize(storage, self._release_extra, need)
            return
        for b in range(first, first + need):
            self.free[b] = False
        self.peak = max(self.peak, self.nbanks - sum(self.free) + self.extra)
        storage.alloc = ("psum", first, need)
        weakref.finalize(storage, self._release, first, need)

    def _release(self, first, need):
        for b in range(first, first + need):
            self.free[b] = True

    def _release_extra(self, need):
        self.extra -= need

    @property
    def in_use(self) -> int:
        return self.nbanks - sum(self.free) + self.extra
