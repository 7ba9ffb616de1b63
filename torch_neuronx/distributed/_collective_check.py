"""Cross-rank checks of collective calls: a clear error instead of a crash.

When ranks call a collective with different shapes, gloo (our transport, and
torch's own gloo backend too) aborts the receiving process from its I/O thread
("op.preamble.length <= op.nbytes"), which Python cannot catch. Before the
data moves, every rank therefore exchanges a short description of its call
(collective, reduce op, root, dtypes and the shapes that must agree) and all
ranks raise the same RuntimeError, naming each rank's call, when they differ.

The exchange is one small all_gather of fixed width, whatever the size of the
collective: a latency-bound cost per call, measured in
benchmarks/collective_check_overhead.py (see docs/distributed.md). It runs on
every collective of a group's whole life by default (a mismatch in the 70th
call aborts as surely as one in the first). `TORCH_NEURONX_COLLECTIVE_CHECKS=N`
checks only the first N calls of each group, `0` turns checks off;
`TORCH_DISTRIBUTED_DEBUG=DETAIL` keeps torch's own wrapper instead.

The schedule depends only on the per-group call count, so ranks that are in
step agree on whether a call is checked. Point-to-point calls are checked by
`_p2p_check` (a header before each send) whenever checks are on.
"""
from __future__ import annotations

import os

import torch

ENV = "TORCH_NEURONX_COLLECTIVE_CHECKS"
DEFAULT_CHECKED_CALLS = None  # every call of the group's life
_DESC_BYTES = 240  # fixed width, so the exchange itself can never mismatch


def checked_calls_from_env() -> int | None:
    """Number of calls to check per group; None = every call."""
    raw = os.environ.get(ENV, "").strip().lower()
    if raw == "":
        return DEFAULT_CHECKED_CALLS
    if raw == "all":
        return None
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"{ENV}={raw!r} is not valid: use a non-negative number of collectives to check per "
                         "group, 'all' to check every call, or 0 to turn checks off")
    return value


def describe(tensor: torch.Tensor) -> str:
    dtype = str(tensor.dtype).replace("torch.", "")
    return f"{dtype}{list(tensor.shape)}"


def describe_list(tensors) -> str:
    return "[" + ", ".join(describe(t) for t in tensors) + "]"


class CollectiveChecker:
    """Owns the call counter of one process group and runs the exchange."""

    def __init__(self, transport, rank: int, size: int, checked_calls: int | None):
        self._transport = transport
        self._rank = rank
        self._size = size
        self._left = checked_calls  # None: unlimited
        self._limit = "every call" if checked_calls is None else f"the first {checked_calls} collectives"
        self.checks_p2p = checked_calls != 0 and size > 1  # send/recv: see _p2p_check
        self._calls = 0
        # Exchange buffers live as long as the group: gloo's worker thread may drop its reference to a
        # finished call's tensors after wait() returns, and if that were the last reference it would
        # need the GIL, which aborts the process when it happens during interpreter exit.
        # They are views of bytearrays, so encoding and comparing are plain byte copies.
        self._mine_bytes = bytearray(_DESC_BYTES)
        self._gathered_bytes = bytearray(_DESC_BYTES * size)
        self._mine = torch.frombuffer(self._mine_bytes, dtype=torch.uint8)
        self._gathered = torch.frombuffer(self._gathered_bytes, dtype=torch.uint8)

    def close(self) -> None:
        """Forget the transport (the group is shutting down): no check runs afterwards."""
        self._transport = None
        self._left = 0

    def wants_check(self) -> bool:
        """Counts the call; True when this call must be checked."""
        self._calls += 1
        if self._size == 1 or self._left == 0:
            return False
        if self._left is not None:
            self._left -= 1
        return True

    def check(self, call: str) -> None:
        """Exchange `call` (a description of this rank's collective) and raise if any rank differs."""
        self._mine_bytes[:] = call.encode()[:_DESC_BYTES].ljust(_DESC_BYTES, b"\0")
        self._transport._allgather_base(self._gathered, self._mine).wait()
        if self._gathered_bytes == self._mine_bytes * self._size:
            return
        calls = [_decode(self._gathered_bytes[r * _DESC_BYTES:(r + 1) * _DESC_BYTES]) for r in range(self._size)]
        lines = "\n".join(f"  rank {r}: {c}" for r, c in enumerate(calls))
        raise RuntimeError(
            f"torch_neuronx: mismatch between collectives across ranks (call #{self._calls} of this process group; "
            f"this is rank {self._rank}):\n{lines}\n"
            "Every rank must call the same collective, with the same reduce op, root, shapes and dtypes, in the same "
            f"order. No data was exchanged. (Checked: {self._limit} of each group, from {ENV}.)")


def _decode(raw: bytes) -> str:
    return bytes(raw).rstrip(b"\0").decode(errors="replace")
