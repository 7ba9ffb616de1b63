"""all_gather_into_tensor / reduce_scatter_tensor on the neuron group take every shape NCCL takes.

The c10d contract (ProcessGroupNCCL::_allgather_base / _reduce_scatter_base) is only "contiguous, one
dtype, world_size x the elements": accelerate's `gather()` and `pad_across_processes` pass an input (1, 2)
with a flat (4,) output. gloo alone rejects those ("invalid tensor size"). Checked on neuron and CPU
tensors, single and coalesced, against the rank-major concatenation of the flattened inputs; sizes that do
not add up and non-contiguous tensors raise a ValueError that names the tensor.
"""
from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

from tests.distributed.dist_harness import run_ranks

WORLD = 2
# (small shape, big shape) for 2 ranks: all_gather gathers small -> big, reduce_scatter scatters big -> small
SHAPES = [((1, 2), (4,)), ((2, 3), (3, 4)), ((6,), (2, 2, 3)), ((2, 1, 3), (12,)), ((0,), (0, 5))]


def _data(rank: int, shape, offset: float = 0.0) -> torch.Tensor:
    n = torch.Size(shape).numel()
    return (torch.arange(n, dtype=torch.float32) + 100 * rank + offset).reshape(shape)


def _check(rank: int, world: int) -> None:
    for device in ("neuron", "cpu"):
        for small, big in SHAPES:
            inp = _data(rank, small).to(device)
            out = torch.full(big, -1.0, device=device)
            dist.all_gather_into_tensor(out, inp)
            expected = torch.cat([_data(r, small).flatten() for r in range(world)]).reshape(big)
            assert torch.equal(out.cpu(), expected), (device, small, big, out)

            src = _data(rank, big).to(device)
            dst = torch.full(small, -1.0, device=device)
            dist.reduce_scatter_tensor(dst, src)
            total = sum(_data(r, big).flatten() for r in range(world))
            n = dst.numel()
            assert torch.equal(dst.cpu().flatten(), total[rank * n:(rank + 1) * n]), (device, small, big, dst)

        # coalesced: both tensors of each pair in a shape of their own
        ins = [_data(rank, (1, 2)).to(device), _data(rank, (3,), 0.5).to(device)]
        outs = [torch.empty(2 * world, device=device), torch.empty(world, 3, device=device)]
        with dist._coalescing_manager(async_ops=True) as cm:
            for o, i in zip(outs, ins):
                dist.all_gather_into_tensor(o, i)
        cm.wait()
        for o, shape, off in zip(outs, [(1, 2), (3,)], [0.0, 0.5]):
            exp = torch.cat([_data(r, shape, off).flatten() for r in range(world)]).reshape(o.shape)
            assert torch.equal(o.cpu(), exp), (device, o)
        srcs = [_data(rank, (world, 2)).to(device), _data(rank, (2 * world,), 0.5).to(device)]
        dsts = [torch.empty(1, 2, device=device), torch.empty(2, 1, device=device)]
        with dist._coalescing_manager(async_ops=True) as cm:
            for d, s in zip(dsts, srcs):
                dist.reduce_scatter_tensor(d, s)
        cm.wait()
        for d, shape, off in zip(dsts, [(world, 2), (2 * world,)], [0.0, 0.5]):
            total = sum(_data(r, shape, off).flatten() for r in range(world))
            assert torch.equal(d.cpu().flatten(), total[rank * 2:(rank + 1) * 2]), (device, d)

        # bad input: a clear error naming the tensor; nothing was sent, so the next collective still works
        with pytest.raises(ValueError, match=r"output tensor must have world_size x input.numel\(\)"):
            dist.all_gather_into_tensor(torch.empty(3, device=device), torch.ones(2, device=device))
        with pytest.raises(ValueError, match="input tensor must have world_size x output.numel"):
            dist.reduce_scatter_tensor(torch.empty(2, device=device), torch.ones(5, device=device))
        with pytest.raises(ValueError, match="input tensor must be contiguous"):
            dist.all_gather_into_tensor(torch.empty(4 * world, device=device),
                                        torch.ones(4, 2, device=device)[:, 0])
        ok = torch.ones(1, device=device)
        dist.all_reduce(ok)
        assert ok.item() == world


def test_gather_and_scatter_shapes_like_nccl():
    run_ranks(_check, WORLD)
