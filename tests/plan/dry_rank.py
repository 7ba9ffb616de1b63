"""Run a dry-run rank inside the test process: the rendezvous and the process group need no peer,
so one interpreter can be rank 3 of 4, then rank 0, one after the other."""
from __future__ import annotations

import contextlib
from datetime import timedelta

import torch
import torch.distributed as dist

from torch_neuronx.plan.distributed import _rendezvous as rendezvous


@contextlib.contextmanager
def dry_rank(monkeypatch, rank: int, world: int, local_world: int | None = None):
    """`init_process_group("neuron")` as rank `rank` of `world` under TORCH_NEURONX_DRY_RUN=1 (env://, as
    torchrun sets it up); restores the environment, the rendezvous and the current device after."""
    local_world = local_world or world
    with monkeypatch.context() as m:
        for key, value in {"TORCH_NEURONX_DRY_RUN": "1", "RANK": rank, "WORLD_SIZE": world,
                           "LOCAL_RANK": rank % local_world, "LOCAL_WORLD_SIZE": local_world,
                           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}.items():
            m.setenv(key, str(value))
        rendezvous.install()   # done at `import torch` when the variable is set before it
        device = torch.neuron.current_device()
        try:
            # a short timeout: were the group real, it would wait for peers that never come
            dist.init_process_group("neuron", timeout=timedelta(seconds=20))
            probe = torch.ones(2, device=torch.device("neuron", rank % local_world))
            dist.all_reduce(probe)   # the fake group moves nothing: a real SUM over the world gives `world`
            assert probe.tolist() == [1.0, 1.0], probe
            yield
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()
            _forget_dtensor_plans()
            rendezvous.uninstall()
            torch.neuron.set_device(device)


def _forget_dtensor_plans() -> None:
    """DTensor caches sharding and redistribution plans by mesh shape, with the group names of the
    rank that made them; a process that is one rank for life never notices, a test that is rank 0
    and then rank 2 must drop them."""
    from torch.distributed.tensor import _redistribute
    from torch.distributed.tensor.debug import _clear_sharding_prop_cache

    _clear_sharding_prop_cache()
    _redistribute._gen_transform_infos.cache_clear()
