"""Estimated execution time: per-instruction costs on one timeline per engine.

Each instruction starts at max(engine free, its operands ready) and occupies its
engine for the cost below; a kernel's time is the latest end over all timelines.
Dependencies are tracked per storage region (read-after-write, write-after-read,
write-after-write), so reusing one buffer serialises and fresh buffers overlap.

Figures (from the NKI architecture / performance / DMA guides; see docs/nki.md):
  TensorE matmul      max(N_moving, 64) PE cycles, x4 for fp32 inputs, /2 fp8 double_row
  VectorE             100 + N (one input) or 100 + 2N (tensor_tensor) cycles;
                      trn2+/bf16/fp16 perf mode: copy/scalar 4x (2x strided or PSUM), tt 2x
  ScalarE             100 + N cycles (+64 to read the accumulators); trn3 bf16 2x
  GpSimd              100 + N cycles (no published rule; an estimate)
  strided operands    innermost stride > 16 bytes doubles the element cost
  DMA                 1300 ns fixed latency + bytes / (23 B/ns x queues used) on trn2,
                      spread over min(16, rows) queues; each contiguous run costs an extra
                      512 bytes' worth of transfer time (descriptor overhead)
"""
from __future__ import annotations

import bisect
from collections import defaultdict


from .._core import dtypes as dt

STATIC_CYCLES = 100
MM_MIN_CYCLES = 64
ACC_READ_CYCLES = 64
DMA_DESC_OVERHEAD_BYTES = 512
COMPUTE_ENGINES = ("tensor", "vector", "scalar", "gpsimd")
ENGINES = COMPUTE_ENGINES + ("dma",)


def box_of(t):
    """Conservative (row0, row1, col0, col1) box a view touches in its storage."""
    st = t._st
    R = st.row
    lo = t.offset
    span = 0
    col_span = 0
    for n, s in zip(t.shape, t.strides):
        span += s * (n - 1)
        if s % R:
            col_span += s * (n - 1)
    hi = lo + span
    r0, r1 = lo // R, hi // R
    if r0 == r1:
        return (r0, r1, lo % R, hi % R)
    c0 = lo % R
    c1 = c0 + col_span
    if c1 >= R:
        return (r0, r1, 0, R - 1)
    return (r0, r1, c0, c1)


def free_elems(t) -> int:
    n = 1
    for s in t.shape[1:]:
        n *= s
    return max(n, 1)


def is_strided(t) -> bool:
    for n, s in zip(reversed(t.shape[1:]), reversed(t.strides[1:])):
        if n > 1:
            return s * t.dtype.itemsize > 16
    return False


def contiguous_run_bytes(t) -> int:
    """Bytes in the innermost contiguous run of a view (DMA descriptor size)."""
    run = 1
    expect = 1
    for n, s in zip(reversed(t.shape), reversed(t.strides)):
        if n == 1:
            continue
        if s != expect:
            break
        run *= n
        expect = s * n
    return run * t.dtype.itemsize


def _lowp(t, target) -> bool:
    d = t.dtype
    if d in (dt.bfloat16, dt.float16):
        return True
    return target.act_lowp_x2 and dt.is_fp8(d)


def vector_cycles(kind: str, ins, out, target) -> float:
    """kind: 'one' (copy/scalar/reduce/reciprocal) or 'two' (tensor_tensor)."""
    ops = [t for t in ins if t is not None] + ([out] if out is not None else [])
    n = max(free_elems(t) for t in ops)
    c = n * (2 if kind == "two" else 1)
    strided = any(is_strided(t) for t in ops)
    if target.dve_perf_mode and all(_lowp(t, target) for t in ops):
        if kind == "two":
            c /= 2
        else:
            c /= 2 if (strided or any(t.buffer.name == "psum" for t in ops)) else 4
    elif strided:
        c *= 2
    return STATIC_CYCLES + c


def scalar_cycles(ins, out, target, acc_read=False) -> float:
    ops = [t for t in ins if t is not None] + [out]
    n = max(free_elems(t) for t in ops)
    c = float(n)
    if target.act_lowp_x2 and all(_lowp(t, target) for t in ops):
        c /= 2
    if any(is_strided(t) for t in ops):
        c *= 2
    return STATIC_CYCLES + c + (ACC_READ_CYCLES if acc_read else 0)


def gpsimd_cycles(ins, out) -> float:
    ops = [t for t in ins if t is not None] + [out]
    n = max(free_elems(t) for t in ops)
    return STATIC_CYCLES + n * (2 if any(is_strided(t) for t in ops) else 1)


def matmul_cycles(stationary, moving, target, double_row=False) -> float:
    n = free_elems(moving)
    c = max(n, MM_MIN_CYCLES)
    if dt.is_fp32(stationary.dtype) and not dt.is_tf32(stationary.dtype):
        c *= 4
    elif double_row and dt.is_fp8(stationary.dtype):
        c /= 2
    return float(c)


class QueuePool:
    """DMA queues: a transfer takes ``nq`` queues for ``d`` ns at the earliest time >= ready
    when that many are free (transfers waiting on data do not block later ready ones)."""

    MAX_INTERVALS = 256

    def __init__(self, n: int):
        self.iv = [[] for _ in range(n)]    # per queue: sorted, disjoint [start, end]

    def _free(self, q, s, e) -> bool:
        lst = self.iv[q]
        i = bisect.bisect_right(lst, s, key=lambda v: v[1])
        return i == len(lst) or lst[i][0] >= e

    def _insert(self, q, s, e):
        lst = self.iv[q]
        i = bisect.bisect_left(lst, s, key=lambda v: v[0])
        lst.insert(i, [s, e])
        if i + 1 < len(lst) and lst[i + 1][0] - e < 1e-6:
            lst[i][1] = lst[i + 1][1]
            del lst[i + 1]
        if i > 0 and s - lst[i - 1][1] < 1e-6:
            lst[i - 1][1] = lst[i][1]
            del lst[i]
        if len(lst) > self.MAX_INTERVALS:           # fill the oldest gap (conservative)
            lst[0][1] = lst[1][1]
            del lst[1]

    def schedule(self, ready: float, d: float, nq: int) -> float:
        cands = {ready}
        for lst in self.iv:
            i = bisect.bisect_right(lst, ready, key=lambda v: v[1])
            cands.update(v[1] for v in lst[i:])
        for c in sorted(cands):
            free = [q for q in range(len(self.iv)) if self._free(q, c, c + d)]
            if len(free) >= nq:
                for q in free[:nq]:
                    self._insert(q, c, c + d)
                return c
        raise AssertionError("unreachable: the last candidate is after every interval")


class CostModel:
    """One timeline per compute engine plus 16 DMA queues."""

    def __init__(self, target):
        self.target = target
        self.ghz = {"tensor": target.pe_ghz, "vector": target.dve_ghz,
                    "scalar": target.act_ghz, "gpsimd": target.pool_ghz}
        self.free = {e: 0.0 for e in COMPUTE_ENGINES}
        self.queues = QueuePool(target.dma_engines)
        self.busy = {e: 0.0 for e in ENGINES}
        self.queue_busy = 0.0
        self.intervals = {e: [] for e in ENGINES}
        self.by_op = defaultdict(lambda: [0, 0.0])
        self.count = {e: 0 for e in ENGINES}
        self.end = 0.0
        self.flops = 0
        self.dma_bytes = 0

    def _ready(self, reads, writes) -> float:
        r = 0.0
        for t in reads:
            if t is not None:
                r = max(r, t._st.log.ready(box_of(t), False))
        for t in writes:
            r = max(r, t._st.log.ready(box_of(t), True))
        return r

    def _record(self, reads, writes, done):
        for t in reads:
            if t is not None:
                t._st.log.add(box_of(t), done, False)
        for t in writes:
            t._st.log.add(box_of(t), done, True)

    def compute(self, engine: str, op: str, reads, writes, cycles: float, flops: int = 0) -> None:
        ready = self._ready(reads, writes)
        dur = cycles / self.ghz[engine]
        start = max(self.free[engine], ready)
        end = start + dur
        self.free[engine] = end
        self.busy[engine] += dur
        self.intervals[engine].append((start, end))
        self.count[engine] += 1
        rec = self.by_op[(engine, op)]
        rec[0] += 1
        rec[1] += dur
        self.flops += flops
        self.end = max(self.end, end)
        self._record(reads, writes, end)

    def dma(self, op: str, src, dst, nbytes: int, rows: int, run_bytes: int) -> None:
        t = self.target
        ready = self._ready([src], [dst])
        nq = max(1, min(t.dma_engines, rows))
        eff = run_bytes / (run_bytes + DMA_DESC_OVERHEAD_BYTES)
        dur = (nbytes / nq) / (t.dma_engine_bytes_per_ns * eff)
        start = self.queues.schedule(ready, dur, nq)
        end = start + dur
        done = end + t.dma_fixed_latency_ns
        self.queue_busy += dur * nq
        self.intervals["dma"].append((start, done))
        self.count["dma"] += 1
        rec = self.by_op[("dma", op)]
        rec[0] += 1
        rec[1] += done - start
        self.dma_bytes += nbytes
        self.end = max(self.end, done)
        self._record([src], [dst], done)


def union_length(iv) -> float:
    if not iv:
        return 0.0
    iv = sorted(iv)
    total = 0.0
    s, e = iv[0]
    for a, b in iv[1:]:
        if a > e:
            total += e - s
            s, e = a, b
        else:
            e = max(e, b)
    return total + e - s


def _merge(iv):
    out = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def intersection_length(a, b) -> float:
    a, b = _merge(a), _merge(b)
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


