"""DryRunProcessGroup: what `backend="neuron"` creates in a dry run.

One process stands in for one rank of the full world: every collective returns at once with
correctly shaped outputs (the caller's own tensors), moves no data and waits for no peer, as
torch's FakeProcessGroup (`backend="fake"`, the C++ `c10d::FakeProcessGroup`) does. It is a Python
`ProcessGroup` with the method names of ProcessGroupNeuron, so the one hook in
`torch_neuronx/estimate/collectives.py` records each call (kind, bytes, group ranks, estimated
Trainium time) in a dry run exactly as it does in a real run; `_get_backend` hands torch the C++
FakeProcessGroup for its questions about splitting and coalescing.

What each collective leaves in memory (the same rules as torch's FakeProcessGroup):
- untouched: all_reduce (and coalesced), reduce, reduce_scatter(_tensor) (and coalesced),
  broadcast, all_to_all, uneven all_to_all_single, gather, scatter, send, recv, barrier. Outputs keep whatever bytes
  they had, so nothing is read or written: with phantom device memory no page is ever touched.
- all_gather, all_gather_into_tensor (and coalesced): every chunk of the output receives this
  rank's input ("all ranks hold what I hold"), which keeps DeviceMesh's checks and
  `all_gather_object` working. The copy runs only on tensors with real bytes behind them
  (CPU tensors always; neuron tensors when device memory is not phantom).
- all_to_all_single split evenly (MoE token counts per destination): every chunk of the output
  receives this rank's own chunk of the input (each peer runs this program and sends this rank
  what this rank sends itself), on tensors with real bytes behind them.
Shape and size checks are NCCL's (the same as the real group's), so a call that would fail on
Trainium fails here too.
"""
from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import FakeProcessGroup

from ...distributed import hooks
from ...distributed import NeuronGroupIdentity, gather_pair, scatter_pair
from . import _memory as memory


class DoneWork(dist.Work):
    """A finished collective: `wait()` returns at once, the future holds the caller's tensors."""

    def __init__(self, result=None) -> None:
        super().__init__()
        self._result = list(result) if result is not None else []

    def wait(self, timeout: timedelta = timedelta(0)) -> bool:
        return True

    def synchronize(self) -> None:
        return None

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return True

    def exception(self):
        return None

    def source_rank(self) -> int:
        return 0

    def result(self) -> list[torch.Tensor]:
        return self._result

    def get_future(self) -> torch.futures.Future:
        fut = torch.futures.Future()
        fut.set_result(self._result)
        return fut

    get_future_result = get_future


def _copy_chunks(output: torch.Tensor, input: torch.Tensor, size: int) -> None:
    """torch's FakeProcessGroup all_gather: each chunk of the output gets this rank's input."""
    if memory.backed(output) and memory.backed(input):
        for chunk in output.view(-1).chunk(size):
            chunk.copy_(input.reshape(-1))


class DryRunProcessGroup(NeuronGroupIdentity, dist.ProcessGroup):
    """A rank of a world that is not there: collectives complete locally, in no time, with no data."""

    def __init__(self, rank: int, size: int, timeout: timedelta | None = None) -> None:
        super().__init__(rank, size)
        self._backend = FakeProcessGroup._create_internal(rank, size)
        self._timeout = timeout
        self._group_name = ""
        self._group_desc = ""
        self._coalesced: list | None = None

    # identity (backend and group names, as ProcessGroupNeuron): _identity.NeuronGroupIdentity

    def _get_backend(self, device=None):
        return self._backend

    def __repr__(self) -> str:
        return f"DryRunProcessGroup(rank={self.rank()}, size={self.size()}, name={self._group_name!r})"

    # ---- bookkeeping -------------------------------------------------------------------------
    def _done(self, result=None) -> DoneWork:
        work = DoneWork(result)
        if self._coalesced is not None:
            self._coalesced.append(work)
        return work

    def _start_coalescing(self, device=None) -> None:
        self._coalesced = []

    def _end_coalescing(self, device=None) -> DoneWork:
        self._coalesced = None
        return DoneWork()

    def set_timeout(self, timeout: timedelta) -> None:
        self._timeout = timeout

    def shutdown(self) -> None:
        return None

    def abort(self) -> None:
        return None

    # ---- reductions: outputs untouched ---------------------------------------------------------
    def allreduce(self, tensors, opts=None):
        return self._done(tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        return self._done(tensors)

    def reduce(self, tensors, opts=None):
        return self._done(tensors)

    def reduce_scatter(self, output_tensors, input_lists, opts=None):
        for out, ins in zip(output_tensors, input_lists):
            if len(ins) != self.size():
                raise ValueError(f"reduce_scatter: each rank passes world_size={self.size()} inputs; got {len(ins)}")
        return self._done(output_tensors)

    def reduce_scatter_single(self, output, input, opts=None):
        scatter_pair(output, input, self.size())
        return self._done([output])

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        for o, i in zip(outputs, inputs):
            scatter_pair(o, i, self.size(), "reduce_scatter_tensor_coalesced")
        return self._done(outputs)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    # ---- gathers: this rank's input in every chunk (real bytes only) --------------------------
    def broadcast(self, tensors, opts=None):
        return self._done(tensors)

    def allgather(self, output_lists, input_tensors, opts=None):
        for outs, inp in zip(output_lists, input_tensors):
            for out in outs:
                _copy_chunks(out, inp, 1)
        return self._done(output_lists)

    def all_gather_single(self, output, input, opts=None):
        gather_pair(output, input, self.size())
        _copy_chunks(output, input, self.size())
        return self._done([output])

    _allgather_base = all_gather_single

    def allgather_coalesced(self, output_lists, input_tensors, opts=None):
        return self.allgather(output_lists, input_tensors, opts)

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        for o, i in zip(outputs, inputs):
            gather_pair(o, i, self.size(), "all_gather_into_tensor_coalesced")
        for o, i in zip(outputs, inputs):
            _copy_chunks(o, i, self.size())
        return self._done(outputs)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def gather(self, output_lists, input_tensors, opts=None):
        return self._done(output_lists)

    def scatter(self, output_tensors, input_lists, opts=None):
        return self._done(output_tensors)

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        # Every rank runs this rank's program, so each peer sends this rank what this rank sends
        # itself: an even exchange (MoE token counts per destination) receives this rank's own
        # chunk from every peer (a busy expert on this rank receives its load from all of them).
        # Uneven splits keep their (phantom) data.
        if not output_split_sizes and not input_split_sizes and output.shape == input.shape \
                and memory.backed(output) and memory.backed(input) and input.numel() % self.size() == 0:
            mine = input.reshape(self.size(), -1)[self.rank()]
            output.reshape(self.size(), -1).copy_(mine.expand(self.size(), -1))
        return self._done([output])

    alltoall_base = all_to_all_single

    def alltoall(self, output_tensors, input_tensors, opts=None):
        return self._done(output_tensors)

    # ---- point to point and barriers ------------------------------------------------------------
    def send(self, tensors, dst_rank: int, tag: int = 0):
        return self._done(tensors)

    def recv(self, tensors, src_rank: int, tag: int = 0):
        return self._done(tensors)

    def recv_anysource(self, tensors, tag: int = 0):
        return self._done(tensors)

    def barrier(self, opts=None):
        return self._done()

    def monitored_barrier(self, timeout=None, wait_all_ranks: bool = False) -> None:
        return None


# Recorded inside torch_neuronx.estimate() by the same observer as the real group (estimate/collectives.py).
hooks.announce_group_class(DryRunProcessGroup)
