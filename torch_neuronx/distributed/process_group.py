"""ProcessGroupNeuron: the c10d process group behind `backend="neuron"`.

Every collective hands gloo (the proven transport, which also covers
multi-node through the torchrun store) CPU views over the same host bytes as
the neuron tensors, so results land in device memory without staging copies.
CPU tensors pass through unchanged, which lets one group serve both devices.

Method names follow both the Python names `torch.distributed` calls and the
virtual methods the C++ trampoline forwards (DDP's reducer, functional
collectives), including the torchcomms-style names of torch 2.13
(`all_gather_single`, `reduce_scatter_single`, `*_coalesced`).
"""
from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import (
    AllgatherOptions,
    AllreduceCoalescedOptions,
    AllreduceOptions,
    AllToAllOptions,
    BarrierOptions,
    BroadcastOptions,
    GatherOptions,
    ReduceOptions,
    ReduceScatterOptions,
    ScatterOptions,
)

from . import _dynamo_skip, _flat, _reduce_ops, _transport_release, hooks
from ._collective_check import CollectiveChecker, checked_calls_from_env, describe, describe_list
from ._p2p_check import P2P_CHECKED_TAGS, P2PChannel
from ._host import host, host_list, host_lists
from ._identity import NeuronGroupIdentity
from ._work import NeuronWork

_dynamo_skip.install()  # compiled callers (DDP under torch.compile) run this transport eagerly


def _make_transport(store, rank: int, size: int, timeout: timedelta):
    """gloo, and the checker of collective calls across ranks (see _collective_check)."""
    checked_calls = checked_calls_from_env()  # a bad value fails before any connection is made
    gloo = dist.ProcessGroupGloo(store, rank, size, timeout)
    # TORCH_DISTRIBUTED_DEBUG=DETAIL: torch's own wrapper checks op, shapes and
    # dtypes before each collective, as for its own backends; ours stands down.
    if dist.get_debug_level() == dist.DebugLevel.DETAIL:
        helper = dist.ProcessGroupGloo(dist.PrefixStore("neuron_debug/", store), rank, size, timeout)
        gloo = dist.distributed_c10d._ProcessGroupWrapper(gloo, helper)
        checked_calls = 0
    return gloo, CollectiveChecker(gloo, rank, size, checked_calls)


class ProcessGroupNeuron(NeuronGroupIdentity, dist.ProcessGroup):
    def __init__(self, store, rank: int, size: int, timeout: timedelta):
        # The (store, rank, size) constructor cannot build a Python subclass.
        super().__init__(rank, size)
        self._store = store
        self._gloo, self._checker = _make_transport(store, rank, size, timeout)
        self._timeout = timeout
        self._group_name = ""
        self._group_desc = ""
        self._coalesced: list | None = None
        self._p2p = P2PChannel(rank)
        _transport_release.track(self)

    # identity (backend and group names): _identity.NeuronGroupIdentity

    def get_group_store(self):
        return self._store

    def _get_backend(self, device=None):
        """The transport; torch asks it about splitting, coalescing, allocation."""
        return self._gloo

    def __repr__(self) -> str:
        return (f"ProcessGroupNeuron(rank={self.rank()}, size={self.size()}, "
                f"name={self._group_name!r})")

    # ---- bookkeeping ------------------------------------------------------
    def _verify(self, describe_call) -> None:
        """Cross-rank check of this call, while checks last (`describe_call` builds its description)."""
        if self._checker.wants_check():
            self._checker.check(describe_call())

    def _work(self, works, result, finish=None, opts=None):
        # A blocking call from torch.distributed (asyncOp False) only waits on
        # the handle: hand back the transport's own work when nothing remains
        # to be done after the transfer, and skip building a wrapper.
        if (finish is None and opts is not None and not opts.asyncOp
                and self._coalesced is None and len(works) == 1):
            return works[0]
        work = NeuronWork(works, result, finish)
        if self._coalesced is not None:
            self._coalesced.append(work)
        return work

    def _start_coalescing(self, device=None) -> None:
        self._coalesced = []

    def _end_coalescing(self, device=None) -> NeuronWork:
        pending, self._coalesced = self._coalesced or [], None
        return NeuronWork(pending, None)

    def set_timeout(self, timeout: timedelta) -> None:
        self._timeout = timeout
        self._gloo.set_timeout(timeout)

    def _transport_open(self) -> bool:
        return not isinstance(self._gloo, _transport_release.ClosedTransport)

    def _close_transport(self):
        """Take the transport out of this group; returns it (None if already closed)."""
        if not self._transport_open():
            return None
        gloo, self._gloo = self._gloo, _transport_release.ClosedTransport(repr(self._group_name or "(unnamed)"))
        self._checker.close()
        return gloo

    def shutdown(self) -> None:
        """Drop the transport: its worker threads are joined now, while the interpreter is alive
        (see _transport_release); later collectives on this group raise a clear error."""
        gloo = self._close_transport()
        if gloo is not None:
            gloo.shutdown()
        del gloo  # the last reference: gloo joins its workers here, with the GIL released

    def abort(self) -> None:
        gloo = self._close_transport()
        if gloo is not None:
            gloo.abort()
            _transport_release.leak(gloo)  # an abort must not block on joining a stuck worker

    # ---- reductions -------------------------------------------------------
    def allreduce(self, tensors, opts=None):
        opts = _options(opts, AllreduceOptions)
        self._verify(lambda: f"all_reduce({_op(opts)}) {describe_list(tensors)}")
        hosts, _, numerics_step = hooks.prepare_collective("all_reduce", opts, host_list(tensors))
        finish = _chain(_reduce_ops.adapt(opts, self.size(), hosts), numerics_step)
        return self._work((self._gloo.allreduce(hosts, opts),), tensors, finish, opts)

    def allreduce_coalesced(self, tensors, opts=None):
        opts = _options(opts, AllreduceCoalescedOptions)
        self._verify(lambda: f"all_reduce_coalesced({_op(opts)}) {describe_list(tensors)}")
        hosts, _, numerics_step = hooks.prepare_collective("all_reduce_coalesced", opts, host_list(tensors))
        finish = _chain(_reduce_ops.adapt(opts, self.size(), hosts), numerics_step)
        if len({(t.dtype, t.layout) for t in hosts}) <= 1:
            works = (self._gloo.allreduce_coalesced(hosts, opts),)
        else:  # gloo coalesces one dtype at a time
            works = tuple(self._gloo.allreduce([t], _allreduce_opts(opts)) for t in hosts)
        return self._work(works, tensors, finish)

    def reduce(self, tensors, opts=None):
        opts = _options(opts, ReduceOptions)
        self._verify(lambda: f"reduce({_op(opts)}, root={opts.rootRank}) {describe_list(tensors)}")
        hosts = host_list(tensors)
        finish = _reduce_ops.adapt(opts, self.size(), hosts)
        if opts.rootRank != self.rank():
            finish = None
        return self._work((self._gloo.reduce(hosts, opts),), tensors, finish, opts)

    def reduce_scatter(self, output_tensors, input_lists, opts=None):
        opts = _options(opts, ReduceScatterOptions)
        self._verify(lambda: f"reduce_scatter({_op(opts)}) {describe_list(output_tensors)} <- "
                             f"{[describe_list(ts) for ts in input_lists]}")
        outs, ins, numerics_step = hooks.prepare_collective("reduce_scatter", opts, host_list(output_tensors),
                                                            host_lists(input_lists))
        finish = _chain(_reduce_ops.adapt(opts, self.size(), outs), numerics_step)
        work = self._gloo.reduce_scatter(outs, ins, opts)
        return self._work((work,), output_tensors, finish, opts)

    def reduce_scatter_single(self, output, input, opts=None):
        opts = _options(opts, ReduceScatterOptions)
        self._verify(lambda: f"reduce_scatter_tensor({_op(opts)}) {describe(output)} <- {describe(input)}")
        out, inp = _flat.scatter_pair(host(output), host(input), self.size())
        (out,), inp, numerics_step = hooks.prepare_collective("reduce_scatter", opts, [out], inp)
        finish = _chain(_reduce_ops.adapt(opts, self.size(), [out]), numerics_step)
        work = self._gloo._reduce_scatter_base(out, inp, opts)
        return self._work((work,), [output], finish, opts)

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        opts = _options(opts, ReduceScatterOptions)
        self._verify(lambda: f"reduce_scatter_tensor_coalesced({_op(opts)}) {describe_list(outputs)} <- "
                             f"{describe_list(inputs)}")
        pairs, numerics_step = [], None
        for o, i in zip(host_list(outputs), host_list(inputs)):
            o, i = _flat.scatter_pair(o, i, self.size(), "reduce_scatter_tensor_coalesced")
            (o,), i, step = hooks.prepare_collective("reduce_scatter_tensor_coalesced", opts, [o], i)
            pairs.append((o, i))
            numerics_step = _chain(numerics_step, step)
        finish = _chain(_reduce_ops.adapt(opts, self.size(), [o for o, _ in pairs]), numerics_step)
        works = tuple(self._gloo._reduce_scatter_base(o, i, _copy_rs_opts(opts)) for o, i in pairs)
        return self._work(works, outputs, finish)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    # ---- gathers and scatters ---------------------------------------------
    def broadcast(self, tensors, opts=None):
        opts = _options(opts, BroadcastOptions)
        self._verify(lambda: f"broadcast(root={opts.rootRank}) {describe_list(tensors)}")
        return self._work((self._gloo.broadcast(host_list(tensors), opts),), tensors, None, opts)

    def allgather(self, output_lists, input_tensors, opts=None):
        opts = _options(opts, AllgatherOptions)
        self._verify(lambda: f"all_gather {[describe_list(ts) for ts in output_lists]} <- "
                             f"{describe_list(input_tensors)}")
        work = self._gloo.allgather(host_lists(output_lists), host_list(input_tensors), opts)
        return self._work((work,), output_lists, None, opts)

    def all_gather_single(self, output, input, opts=None):
        opts = _options(opts, AllgatherOptions)
        self._verify(lambda: f"all_gather_into_tensor {describe(output)} <- {describe(input)}")
        work = self._gloo._allgather_base(*_flat.gather_pair(host(output), host(input), self.size()), opts)
        return self._work((work,), [output], None, opts)

    _allgather_base = all_gather_single

    def allgather_coalesced(self, output_lists, input_tensors, opts=None):
        opts = _options(opts, AllgatherOptions)
        self._verify(lambda: f"all_gather_coalesced {[describe_list(ts) for ts in output_lists]} <- "
                             f"{describe_list(input_tensors)}")
        work = self._gloo.allgather_coalesced(host_lists(output_lists), host_list(input_tensors), opts)
        return self._work((work,), output_lists, None, opts)

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        opts = _options(opts, AllgatherOptions)
        self._verify(lambda: f"all_gather_into_tensor_coalesced {describe_list(outputs)} <- {describe_list(inputs)}")
        pairs = [_flat.gather_pair(o, i, self.size(), "all_gather_into_tensor_coalesced")
                 for o, i in zip(host_list(outputs), host_list(inputs))]  # all checked before any transfer
        works = tuple(self._gloo._allgather_base(o, i, _copy_ag_opts(opts)) for o, i in pairs)
        return self._work(works, outputs)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def gather(self, output_lists, input_tensors, opts=None):
        opts = _options(opts, GatherOptions)
        self._verify(lambda: f"gather(root={opts.rootRank}) {describe_list(input_tensors)}")
        work = self._gloo.gather(host_lists(output_lists), host_list(input_tensors), opts)
        return self._work((work,), output_lists, None, opts)

    def scatter(self, output_tensors, input_lists, opts=None):
        opts = _options(opts, ScatterOptions)
        self._verify(lambda: f"scatter(root={opts.rootRank}) {describe_list(output_tensors)}")
        work = self._gloo.scatter(host_list(output_tensors), host_lists(input_lists), opts)
        return self._work((work,), output_tensors, None, opts)

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        opts = _options(opts, AllToAllOptions)
        # uneven splits let sizes differ across ranks; the dtype and the row shape must agree
        self._verify(lambda: f"all_to_all_single {_rows(output)} <- {_rows(input)}")
        work = self._gloo.alltoall_base(host(output), host(input), list(output_split_sizes),
                                        list(input_split_sizes), opts)
        return self._work((work,), [output], None, opts)

    alltoall_base = all_to_all_single

    def alltoall(self, output_tensors, input_tensors, opts=None):
        """List all_to_all through one flat all_to_all_single (gloo has no list form)."""
        opts = _options(opts, AllToAllOptions)
        self._verify(lambda: f"all_to_all {len(output_tensors)} outputs <- {len(input_tensors)} inputs")
        ins = host_list(input_tensors)
        outs = host_list(output_tensors)
        dtype = ins[0].dtype
        if any(t.dtype != dtype for t in ins + outs):
            raise ValueError("all_to_all needs one dtype for every input and output tensor")
        flat_in = torch.cat([t.reshape(-1) for t in ins]) if ins else torch.empty(0, dtype=dtype)
        flat_out = torch.empty(sum(t.numel() for t in outs), dtype=dtype)
        in_splits = [t.numel() for t in ins]
        out_splits = [t.numel() for t in outs]
        work = self._gloo.alltoall_base(flat_out, flat_in, out_splits, in_splits, opts)

        def unpack() -> None:
            for dst, src in zip(outs, flat_out.split(out_splits)):
                dst.copy_(src.view(dst.shape))

        return self._work((work,), output_tensors, unpack)

    # ---- point to point and barriers --------------------------------------
    # With checks on, each send carries a header and each recv checks it first (_p2p_check).
    def send(self, tensors, dst_rank: int, tag: int = 0):
        if self._checks_p2p(tensors, tag):
            return self._p2p_work(self._p2p.send(self._gloo, tensors[0], host(tensors[0]), dst_rank, tag))
        return self._work((self._gloo.send(host_list(tensors), dst_rank, tag),), tensors)

    def recv(self, tensors, src_rank: int, tag: int = 0):
        if self._checks_p2p(tensors, tag):
            return self._p2p_work(self._p2p.recv(self._gloo, tensors[0], host(tensors[0]), src_rank, tag))
        return self._work((self._gloo.recv(host_list(tensors), src_rank, tag),), tensors)

    def recv_anysource(self, tensors, tag: int = 0):
        if self._checks_p2p(tensors, tag):
            return self._p2p_work(self._p2p.recv(self._gloo, tensors[0], host(tensors[0]), -1, tag))
        return self._work((self._gloo.recv_anysource(host_list(tensors), tag),), tensors)

    def _checks_p2p(self, tensors, tag: int) -> bool:
        return self._checker.checks_p2p and len(tensors) == 1 and 0 <= tag < P2P_CHECKED_TAGS

    def _p2p_work(self, work):
        if self._coalesced is not None:
            self._coalesced.append(work)
        return work

    def barrier(self, opts=None):
        opts = _options(opts, BarrierOptions)
        self._verify(lambda: "barrier")
        return self._work((self._gloo.barrier(opts),), None, None, opts)

    def monitored_barrier(self, timeout=None, wait_all_ranks: bool = False) -> None:
        self._gloo.monitored_barrier(timeout or self._timeout, wait_all_ranks)


def _options(opts, cls):
    if opts is None:
        return cls()
    if isinstance(opts, (dist.ReduceOp, dist.ReduceOp.RedOpType)):  # legacy (tensors, op) form
        new = cls()
        new.reduceOp = opts
        return new
    return opts


def _op(opts) -> str:
    op = opts.reduceOp
    return str(getattr(op, "op", op)).replace("RedOpType.", "").replace("ReduceOp.", "")


def _rows(t: torch.Tensor) -> str:
    """dtype and shape past the first dimension (what all_to_all_single splits on)."""
    return f"{str(t.dtype).replace('torch.', '')}[*, {', '.join(map(str, t.shape[1:]))}]"


def _allreduce_opts(coalesced) -> AllreduceOptions:
    opts = AllreduceOptions()
    opts.reduceOp = coalesced.reduceOp
    opts.timeout = coalesced.timeout
    return opts


def _copy_rs_opts(opts) -> ReduceScatterOptions:
    new = ReduceScatterOptions()
    new.reduceOp = opts.reduceOp
    new.timeout = opts.timeout
    new.asyncOp = opts.asyncOp
    return new


def _copy_ag_opts(opts) -> AllgatherOptions:
    new = AllgatherOptions()
    new.timeout = opts.timeout
    new.asyncOp = opts.asyncOp
    return new


def _chain(first, then):
    """Run `first` (e.g. the AVG division) and then `then` (the numerics step); None when both are None."""
    if first is None or then is None:
        return first or then

    def both() -> None:
        first()
        then()
    return both


# Observers of the group classes (the cost model costs each collective inside torch_neuronx.estimate()).
hooks.announce_group_class(ProcessGroupNeuron)
