"""The process group a model-level plan runs in: one rank of the full world, collectives faked.

Every TP / FSDP / DP rank of these layouts does the same work on its own shard, so one process
stands for all of them (rank 0). In a dry run the process group is DryRunProcessGroup
(plan/distributed) of the full world size, so transformers shards each weight exactly as it
would on `world_size` real ranks, no data moves, and every collective is recorded by the
estimate layer with its bytes, group ranks and estimated time.
"""
from __future__ import annotations

import contextlib


@contextlib.contextmanager
def fake_world(world_size: int, rank: int = 0):
    """A default process group of `world_size` ranks with no peers (this process is `rank`); an
    existing process group of that size is used as it is."""
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

    from .._dry_run_env import requested as dry_run_requested

    if dry_run_requested():
        # the "neuron" backend builds the dry run's group (plan/distributed): collectives estimated
        dist.init_process_group(backend="neuron", store=FakeStore(), rank=rank, world_size=world_size)
    else:
        # a real (tiny) plan: torch's fake group serves neuron tensors too; its collectives are not
        # seen by the estimate, so a real plan's times leave collectives out (the report says so)
        dist.init_process_group(backend="neuron:fake,cpu:fake", store=FakeStore(), rank=rank,
                                world_size=world_size)
    try:
        yield
    finally:
        dist.destroy_process_group()
