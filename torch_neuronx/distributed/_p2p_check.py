"""Checked point-to-point calls: a send/recv mismatch is a clear error, not an abort.

gloo aborts the receiving process from its I/O thread when a send carries more
bytes than the matching recv posted ("op.preamble.length <= op.nbytes"), and a
smaller send silently fills part of the buffer. So every send is preceded by a
fixed-width header (dtype, element count, bytes, shape) on a companion slot,
and a recv posts its data buffer only once the header has arrived and agrees:

- `send` posts the header and the data at once (both asynchronous), exactly
  as before plus one small message.
- `recv` posts the header receive at once; the data receive is posted when the
  header is read: in the recv's own `wait()`, or in any later `wait()` on a
  send to that peer (so two ranks that each wait on their send before their
  recv still progress, as with plain gloo, whose data moves as soon as both
  sides have posted).
- A receive from any source reads its header at once (see `recv`).
- On a mismatch the sender's bytes are drained into a scratch buffer (the
  sender completes, the slots stay in step), the receive tensor is left
  untouched, and the recv raises a RuntimeError naming both sides.

Receives on one (source, tag) are matched in posting order, as gloo matches
them; a header is only ever read in that order.
"""
from __future__ import annotations

import collections
from datetime import timedelta

import torch
import torch.distributed as dist

_HEADER_BYTES = 256
_HEADER_SLOT = 1 << 30  # headers travel on tag ^ this bit, beside the user's tag
P2P_CHECKED_TAGS = _HEADER_SLOT  # user tags below this are checked (above, headers would collide)
_NO_TIMEOUT = timedelta(0)
_ANY = -1


def _describe(t: torch.Tensor) -> tuple[str, int]:
    dtype = str(t.dtype).replace("torch.", "")
    return f"{dtype}|{t.numel()}|{t.numel() * t.element_size()}|{list(t.shape)}", t.numel() * t.element_size()


def _key(desc: str) -> str:
    dtype, numel = desc.split("|")[:2]
    return f"{dtype}|{numel}"


def _shown(desc: str) -> str:
    dtype, _, _, shape = desc.split("|")
    return f"{dtype}{shape}"


def _header_tag(tag: int) -> int:
    return tag ^ _HEADER_SLOT


class _PendingRecv:
    def __init__(self, host: torch.Tensor, desc: str, src: int, tag: int, header: torch.Tensor, header_work):
        self.host, self.desc, self.src, self.tag = host, desc, src, tag
        self.header, self.header_work = header, header_work
        self.data_work = None
        self.error: str | None = None
        self.source = src


class P2PChannel:
    """The point-to-point state of one process group (its pending receives)."""

    def __init__(self, rank: int):
        self._rank = rank
        self._pending: dict[tuple[int, int], collections.deque] = collections.defaultdict(collections.deque)

    def send(self, transport, tensor: torch.Tensor, host: torch.Tensor, dst: int, tag: int) -> "P2PSendWork":
        desc, _ = _describe(tensor)
        header = _encode(desc)
        header_work = transport.send([header], dst, _header_tag(tag))
        data_work = transport.send([host], dst, tag)
        return P2PSendWork(self, transport, dst, (header_work, data_work), header)

    def recv(self, transport, tensor: torch.Tensor, host: torch.Tensor, src: int, tag: int):
        desc, _ = _describe(tensor)
        header = torch.zeros(_HEADER_BYTES, dtype=torch.uint8)
        if src == _ANY:
            header_work = transport.recv_anysource([header], _header_tag(tag))
        else:
            header_work = transport.recv([header], src, _header_tag(tag))
        pending = _PendingRecv(host, desc, src, tag, header, header_work)
        if src == _ANY:
            # torch asks a receive from any source for its source through a C++ method that a
            # Python work cannot provide, so this one reads its header now and hands back the
            # transport's own work for the data (which knows its source).
            self._post_one(transport, pending, _NO_TIMEOUT)
            if pending.error is not None:
                pending.data_work.wait()
                raise RuntimeError(pending.error)
            return pending.data_work
        self._pending[(src, tag)].append(pending)
        return P2PRecvWork(self, transport, pending)

    def post(self, transport, pending: _PendingRecv, timeout) -> None:
        """Read the headers of `pending` and of every earlier recv on its slot, posting their data."""
        queue = self._pending[(pending.src, pending.tag)]
        while pending in queue:
            self._post_one(transport, queue.popleft(), timeout)

    def post_from(self, transport, peer: int, timeout) -> None:
        """Post every pending recv from `peer` (a send to it may wait on them, see the module doc)."""
        for (src, _tag), queue in list(self._pending.items()):
            if src == peer:
                while queue:
                    self._post_one(transport, queue.popleft(), timeout)

    def _post_one(self, transport, pending: _PendingRecv, timeout) -> None:
        pending.header_work.wait(timeout)
        if pending.src == _ANY:
            pending.source = pending.header_work.source_rank()
        theirs = bytes(pending.header.tolist()).rstrip(b"\0").decode(errors="replace")
        if _key(theirs) == _key(pending.desc):
            pending.data_work = transport.recv([pending.host], pending.source, pending.tag)
            return
        nbytes = int(theirs.split("|")[2])
        scratch = torch.empty(nbytes, dtype=torch.uint8)
        pending.data_work = transport.recv([scratch], pending.source, pending.tag)  # drained, never shown
        pending.error = (
            f"torch_neuronx: send/recv mismatch (this is rank {self._rank}, receiving from rank {pending.source}, "
            f"tag {pending.tag}): rank {pending.source} sent {_shown(theirs)}, this rank's recv expects "
            f"{_shown(pending.desc)}. The receive tensor was left unchanged. A recv must match its send's dtype "
            "and number of elements.")


class _P2PWork(dist.Work):
    """What a checked send and a checked recv answer alike; each says how it waits and completes."""

    def is_success(self) -> bool:
        return self.is_completed()

    def exception(self):
        return None

    def synchronize(self) -> None:
        self.wait()

    def result(self) -> list[torch.Tensor]:
        self.wait()
        return []

    def get_future(self) -> torch.futures.Future:
        return _completed_future(self)


class P2PSendWork(_P2PWork):
    def __init__(self, channel: P2PChannel, transport, dst: int, works, header: torch.Tensor):
        super().__init__()
        self._channel, self._transport, self._dst = channel, transport, dst
        self._works, self._header = works, header

    def wait(self, timeout: timedelta = _NO_TIMEOUT) -> bool:
        self._channel.post_from(self._transport, self._dst, timeout)
        for w in self._works:
            w.wait(timeout)
        return True

    def is_completed(self) -> bool:
        return all(w.is_completed() for w in self._works)


class P2PRecvWork(_P2PWork):
    def __init__(self, channel: P2PChannel, transport, pending: _PendingRecv):
        super().__init__()
        self._channel, self._transport, self._pending = channel, transport, pending

    def _posted(self) -> _PendingRecv:
        if self._pending.data_work is None:
            self._channel.post(self._transport, self._pending, _NO_TIMEOUT)
        return self._pending

    def wait(self, timeout: timedelta = _NO_TIMEOUT) -> bool:
        if self._pending.data_work is None:
            self._channel.post(self._transport, self._pending, timeout)
        self._pending.data_work.wait(timeout)
        if self._pending.error is not None:
            raise RuntimeError(self._pending.error)
        return True

    def is_completed(self) -> bool:
        return self._posted().data_work.is_completed()

    def is_success(self) -> bool:
        return self.is_completed() and self._pending.error is None

    def source_rank(self) -> int:
        return self._posted().source


def _completed_future(work) -> torch.futures.Future:
    """A future that holds once the call is done (gloo's own p2p futures complete in wait(), too)."""
    fut = torch.futures.Future()
    work.wait()
    fut.set_result([])
    return fut


def _encode(desc: str) -> torch.Tensor:
    data = desc.encode()[:_HEADER_BYTES].ljust(_HEADER_BYTES, b"\0")
    return torch.frombuffer(bytearray(data), dtype=torch.uint8)
