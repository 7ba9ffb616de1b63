"""The process group a model-level plan runs in: one rank of the full world, collectives faked.

Every TP / FSDP / DP rank of these layouts does the same work on its own shard, so one process
stands for all of them (rank 0). The process group has the full world size, so transformers
shards each weight exactly as it would on `world_size` real ranks, but no data moves.
"""
from __future__ import annotations

import contextlib


@contextlib.contextmanager
def fake_world(world_size: int, rank: int = 0):
    """A default process group of `world_size` ranks whose collectives do nothing (this process is
    `rank`); an existing process group is left alone and used as it is."""
    import torch.distributed as dist

    if dist.is_initialized():
        if dist.get_world_size() != world_size:
            raise RuntimeError(f"a process group of {dist.get_world_size()} ranks already exists; the plan "
                               f"needs {world_size}: run the plan in a fresh process")
        yield
        return
    if world_size == 1:
        yield
        return
    from torch.testing._internal.distributed.fake_pg import FakeStore

    # torch's fake backend serves any device type named in the backend string
    dist.init_process_group(backend="neuron:fake,cpu:fake", store=FakeStore(), rank=rank,
                            world_size=world_size)
    try:
        yield
    finally:
        dist.destroy_process_group()
