"""Collectives of backend "neuron" on neuron tensors: every op and dtype the
issue lists, results in the same device memory, no device allocations."""
from __future__ import annotations

import functools
import operator

import pytest
import torch
import torch.distributed as dist

from tests.distributed.dist_harness import run_ranks

R = dist.ReduceOp
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.uint8, torch.bool]
OPS = {
    "SUM": (R.SUM, lambda xs: functools.reduce(operator.add, xs)),
    "AVG": (R.AVG, None),
    "PRODUCT": (R.PRODUCT, lambda xs: functools.reduce(operator.mul, xs)),
    "MIN": (R.MIN, lambda xs: functools.reduce(torch.minimum, xs)),
    "MAX": (R.MAX, lambda xs: functools.reduce(torch.maximum, xs)),
    "BAND": (R.BAND, lambda xs: functools.reduce(operator.and_, xs)),
    "BOR": (R.BOR, lambda xs: functools.reduce(operator.or_, xs)),
    "BXOR": (R.BXOR, lambda xs: functools.reduce(operator.xor, xs)),
}


def _value(rank: int, dtype: torch.dtype, n: int = 6) -> torch.Tensor:
    """Rank-dependent input, exact in every dtype (CPU)."""
    if dtype == torch.bool:
        return torch.tensor([True, rank == 0, False, True, rank % 2 == 1, True][:n])
    return (torch.arange(n) % 3 + rank + 1).to(dtype)


def _expected(name, world, dtype):
    xs = [_value(r, dtype) for r in range(world)]
    if name == "AVG":
        total = functools.reduce(operator.add, [x.to(torch.int64) for x in xs])
        if dtype.is_floating_point:
            return (total.to(torch.float64) / world).to(dtype)
        return torch.div(total, world, rounding_mode="floor").to(dtype)
    if dtype == torch.bool and name in ("SUM", "PRODUCT"):
        reduce = operator.or_ if name == "SUM" else operator.and_
        return functools.reduce(reduce, xs)
    return OPS[name][1](xs)


def _supported(name, dtype) -> bool:
    if name in ("BAND", "BOR", "BXOR"):
        return not dtype.is_floating_point
    return not (name == "AVG" and dtype == torch.bool)


def _all_reduce_matrix(rank, world):
    dev = torch.device("neuron", rank)
    failures = []
    keep = []  # no frees during the loop: the transport releases its views late
    for dtype in DTYPES:
        for name, (op, _) in OPS.items():
            t = _value(rank, dtype).to(dev)
            keep.append(t)
            ptr = t.data_ptr()
            before = torch.neuron.memory_allocated(dev)
            if not _supported(name, dtype):
                with pytest.raises((ValueError, RuntimeError)):
                    dist.all_reduce(t, op=op)
                continue
            dist.all_reduce(t, op=op)
            if t.data_ptr() != ptr or t.device != dev:
                failures.append(f"{name}/{dtype}: result not in place")
            if torch.neuron.memory_allocated(dev) != before:
                failures.append(f"{name}/{dtype}: allocated device memory")
            if not torch.equal(t.cpu(), _expected(name, world, dtype)):
                failures.append(f"{name}/{dtype}: {t.cpu().tolist()} != {_expected(name, world, dtype).tolist()}")
    assert not failures, failures


def _other_collectives(rank, world):
    dev = torch.device("neuron", rank)
    for dtype in DTYPES:
        x = _value(rank, dtype).to(dev)
        # broadcast
        b = x.clone()
        dist.broadcast(b, src=world - 1)
        assert torch.equal(b.cpu(), _value(world - 1, dtype)), ("broadcast", dtype)
        # reduce (SUM to rank 0; bool is OR)
        if dtype != torch.bool:
            r = x.clone()
            dist.reduce(r, dst=0)
            if rank == 0:
                assert torch.equal(r.cpu(), _expected("SUM", world, dtype)), ("reduce", dtype)
        # all_gather (list) and all_gather_into_tensor
        outs = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(outs, x)
        for r_, o in enumerate(outs):
            assert o.device == dev and torch.equal(o.cpu(), _value(r_, dtype)), ("all_gather", dtype)
        flat = torch.empty(world * x.numel(), dtype=dtype, device=dev)
        ptr = flat.data_ptr()
        dist.all_gather_into_tensor(flat, x)
        assert flat.data_ptr() == ptr
        assert torch.equal(flat.cpu(), torch.cat([_value(r_, dtype) for r_ in range(world)])), ("agit", dtype)
        # reduce_scatter (list) and reduce_scatter_tensor, SUM and AVG
        if dtype != torch.bool:
            big = torch.cat([_value(rank, dtype)] * world).to(dev)
            out = torch.empty_like(x)
            dist.reduce_scatter_tensor(out, big)
            assert torch.equal(out.cpu(), _expected("SUM", world, dtype)), ("rst", dtype)
            out2 = torch.empty_like(x)
            dist.reduce_scatter(out2, list(big.chunk(world)), op=R.AVG)
            assert torch.equal(out2.cpu(), _expected("AVG", world, dtype)), ("rs avg", dtype)
        # gather and scatter
        gathered = [torch.empty_like(x) for _ in range(world)] if rank == 0 else None
        dist.gather(x, gathered, dst=0)
        if rank == 0:
            assert all(torch.equal(g.cpu(), _value(r_, dtype)) for r_, g in enumerate(gathered))
        piece = torch.empty_like(x)
        dist.scatter(piece, [_value(r_ + 10, dtype).to(dev) for r_ in range(world)] if rank == 0 else None, src=0)
        assert torch.equal(piece.cpu(), _value(rank + 10, dtype)), ("scatter", dtype)
    # all_to_all_single with uneven splits: rank r sends (j + 1) rows to rank j
    in_splits = [j + 1 for j in range(world)]
    out_splits = [rank + 1] * world
    inp = torch.cat([torch.full((j + 1, 2), float(100 * rank + j), device=dev) for j in range(world)])
    out = torch.empty(sum(out_splits), 2, device=dev)
    dist.all_to_all_single(out, inp, out_splits, in_splits)
    want = torch.cat([torch.full((rank + 1, 2), float(100 * src + rank)) for src in range(world)])
    assert torch.equal(out.cpu(), want.float()), "all_to_all_single uneven"
    # all_to_all (lists, uneven sizes)
    ins = [torch.full((j + 1,), 10 * rank + j, device=dev, dtype=torch.int64) for j in range(world)]
    outs = [torch.empty(rank + 1, device=dev, dtype=torch.int64) for _ in range(world)]
    dist.all_to_all(outs, ins)
    for src, o in enumerate(outs):
        assert torch.equal(o.cpu(), torch.full((rank + 1,), 10 * src + rank)), "all_to_all"
    # barrier with device_ids, as transformers calls it
    dist.barrier(device_ids=[rank])
    dist.barrier()


def test_all_reduce_every_op_and_dtype():
    run_ranks(_all_reduce_matrix, 2)


def test_broadcast_reduce_gather_scatter_all_to_all():
    run_ranks(_other_collectives, 2)


def _async_p2p_objects_cpu(rank, world):
    dev = torch.device("neuron", rank)
    peer = 1 - rank
    # async work: wait, is_completed, get_future yields the neuron tensor
    t = torch.full((8,), float(rank + 1), device=dev)
    work = dist.all_reduce(t, async_op=True)
    assert isinstance(work, dist.Work)
    fut = work.get_future()
    assert work.wait() is True
    assert work.is_completed()
    value = fut.wait()
    assert value[0] is t and torch.equal(t.cpu(), torch.full((8,), 3.0))
    # AVG finishes in place even when only the future is waited on
    t2 = torch.full((4,), float(rank), device=dev)
    out = dist.all_reduce(t2, op=R.AVG, async_op=True).get_future().wait()
    assert out[0].device == dev and torch.equal(t2.cpu(), torch.full((4,), 0.5))
    w = dist.all_gather_into_tensor(torch.empty(4, device=dev), torch.ones(2, device=dev), async_op=True)
    w.wait()
    # send / recv / isend / irecv / batch_isend_irecv
    buf = torch.empty(3, device=dev, dtype=torch.int64)
    if rank == 0:
        dist.send(torch.tensor([1, 2, 3], device=dev), dst=1)
        dist.recv(buf, src=1)
    else:
        dist.recv(buf, src=0)
        dist.send(buf * 10, dst=0)
    assert buf.cpu().tolist() == ([10, 20, 30] if rank == 0 else [1, 2, 3])
    s = torch.full((2,), float(rank), device=dev)
    r = torch.empty(2, device=dev)
    reqs = [dist.isend(s, dst=peer), dist.irecv(r, src=peer)]
    for q in reqs:
        q.wait()
    assert torch.equal(r.cpu(), torch.full((2,), float(peer)))
    r2 = torch.empty(2, device=dev)
    ops = [dist.P2POp(dist.isend, s + 1, peer), dist.P2POp(dist.irecv, r2, peer)]
    for q in dist.batch_isend_irecv(ops):
        q.wait()
    assert torch.equal(r2.cpu(), torch.full((2,), float(peer + 1)))
    # object collectives and CPU tensors on the same group (backend="neuron" alone)
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank, "s": "x" * rank})
    assert objs == [{"rank": i, "s": "x" * i} for i in range(world)]
    lst = [{"k": 42}, "y"] if rank == 0 else [None, None]
    dist.broadcast_object_list(lst, src=0)
    assert lst == [{"k": 42}, "y"]
    got = [None] * world if rank == 0 else None
    dist.gather_object(("g", rank), got, dst=0)
    assert rank != 0 or got == [("g", i) for i in range(world)]
    mine = [None]
    dist.scatter_object_list(mine, [f"s{i}" for i in range(world)] if rank == 0 else None, src=0)
    assert mine == [f"s{rank}"]
    c = torch.full((4,), float(rank + 1))
    dist.all_reduce(c)
    assert c.device.type == "cpu" and torch.equal(c, torch.full((4,), 3.0))
    # coalesced variants (FSDP2 / DTensor)
    outs = [torch.empty(4, device=dev), torch.empty(6, device=dev, dtype=torch.bfloat16)]
    ins = [torch.full((2,), float(rank), device=dev), torch.full((3,), float(rank), device=dev, dtype=torch.bfloat16)]
    with dist._coalescing_manager(async_ops=True) as cm:
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i)
    cm.wait()
    assert torch.equal(outs[0].cpu(), torch.tensor([0., 0, 1, 1]))
    assert torch.equal(outs[1].float().cpu(), torch.tensor([0., 0, 0, 1, 1, 1]))
    rs_out = [torch.empty(2, device=dev), torch.empty(1, device=dev)]
    rs_in = [torch.ones(4, device=dev) * (rank + 1), torch.ones(2, device=dev) * (rank + 1)]
    with dist._coalescing_manager():
        for o, i in zip(rs_out, rs_in):
            dist.reduce_scatter_tensor(o, i, op=R.AVG)
    assert torch.equal(rs_out[0].cpu(), torch.full((2,), 1.5)) and rs_out[1].item() == 1.5
    ar = [torch.ones(3, device=dev), torch.ones(2, device=dev, dtype=torch.int64)]
    with dist._coalescing_manager():
        for a in ar:
            dist.all_reduce(a)
    assert ar[0].cpu().tolist() == [2.0] * 3 and ar[1].cpu().tolist() == [2, 2]
    pg = dist.group.WORLD
    premul = dist._make_nccl_premul_sum(0.25)
    o = torch.empty(2, device=dev)
    dist.reduce_scatter_tensor(o, torch.full((4,), 2.0, device=dev), op=premul)
    assert torch.equal(o.cpu(), torch.full((2,), 1.0))
    assert pg.name() == "neuron" and dist.get_backend() == "neuron"


def test_async_p2p_objects_cpu_coalesced():
    run_ranks(_async_p2p_objects_cpu, 2)


def _subgroups(rank, world):
    dev = torch.device("neuron", rank)
    evens = dist.new_group([0, 2])
    odds = dist.new_group([1, 3])
    mine = evens if rank % 2 == 0 else odds
    t = torch.full((2,), float(rank), device=dev)
    dist.all_reduce(t, group=mine)
    assert t.cpu().tolist() == ([2.0, 2.0] if rank % 2 == 0 else [4.0, 4.0])
    assert dist.get_backend(mine) == "neuron" and mine.size() == 2
    # group-relative ranks for src / dst
    b = torch.full((1,), float(rank), device=dev)
    dist.broadcast(b, group=mine, group_src=1)
    assert b.item() == (2.0 if rank % 2 == 0 else 3.0)
    # new_subgroups and 4-rank uneven all_to_all_single
    in_splits = [(rank + j) % 3 for j in range(world)]
    out_splits = [(src + rank) % 3 for src in range(world)]
    inp = torch.arange(sum(in_splits), device=dev, dtype=torch.int32) + 100 * rank
    out = torch.empty(sum(out_splits), device=dev, dtype=torch.int32)
    dist.all_to_all_single(out, inp, out_splits, in_splits)
    pieces = []
    for src in range(world):
        src_splits = [(src + j) % 3 for j in range(world)]
        start = sum(src_splits[:rank])
        pieces.append(torch.arange(start, start + src_splits[rank], dtype=torch.int32) + 100 * src)
    assert torch.equal(out.cpu(), torch.cat(pieces))
    dist.destroy_process_group(mine)


def test_new_group_and_four_ranks():
    run_ranks(_subgroups, 4)
