"""Cross-rank checks of collective calls: a clear error instead of a crash.

When ranks call a collective with different shapes, gloo (our transport, and
torch's own gloo backend too) aborts the receiving process from its I/O thread
("op.preamble.length <= op.nbytes"), which Python cannot catch. Before the
data moves, every rank therefore exchanges a short description of its call
(collective, reduce op, root, dtypes and the shapes that must agree) and all
ranks raise the same RuntimeError, naming each rank's call, when they differ.

The exchange is one small all_gather, which on a latency-bound small message
would double its cost. Checks therefore run on the first
`TORCH_NEURONX_COLLECTIVE_CHECKS` collectives of each group (default 64: set-up
mistakes such as a rank with another batch size or dtype show up at once) and
cost nothing afterwards. `TORCH_NEURONX_COLLECTIVE_CHECKS=all` checks every call;
`0` turns checks off. `TORCH_DISTRIBUTED_DEBUG=DETAIL` keeps torch's own wrapper,
which checks every call.

The schedule depends only on the per-group call count, so ranks that are in
step agree on whether a call is checked.
"""
from __future__ import annotations

import os

import torch

ENV = "TORCH_NEURONX_COLLECTIVE_CHECKS"
DEFAULT_CHECKED_CALLS = 64
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
        self._calls = 0
        # Exchange buffers live as long as the group: gloo's worker thread may drop its reference to a
        # finished call's tensors after wait() returns, and if that were the last reference it would
        # need the GIL, which aborts the process when it happens during interpreter exit.
        self._mine = torch.zeros(_DESC_BYTES, dtype=torch.uint8, device="cpu")
        self._gathered = [torch.empty_like(self._mine) for _ in range(size)]

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
        _encode_into(call, self._mine)
        self._transport.allgather([self._gathered], [self._mine]).wait()
        calls = [_decode(t) for t in self._gathered]
        if len(set(calls)) == 1:
            return
        lines = "\n".join(f"  rank {r}: {c}" for r, c in enumerate(calls))
        raise RuntimeError(
            f"torch_neuronx: mismatch between collectives across ranks (call #{self._calls} of this process group; "
            f"this is rank {self._rank}):\n{lines}\n"
            "Every rank must call the same collective, with the same reduce op, root, shapes and dtypes, in the same "
            f"order. No data was exchanged. (Checked: {self._limit} of each group, from {ENV}; set {ENV}=all to "
            "check every call.)")


def _encode_into(call: str, out: torch.Tensor) -> None:
    data = call.encode()[:_DESC_BYTES]
    out.zero_()
    if data:
        out[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)


def _decode(t: torch.Tensor) -> str:
    return bytes(t.tolist()).rstrip(b"\0").decode(errors="replace")
