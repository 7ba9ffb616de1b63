"""The TP2 x FSDP2 training workload both sides of the exactness test run: a 2-layer MLP, tensor
parallel inside each pair of ranks (DTensor), FSDP2 across pairs, AdamW, two steps.

`train(rank, world)` returns this rank's peak device memory above what the core held before, and
its collectives as the estimate layer recorded them (kind, bytes, group ranks), in call order.
"""
from __future__ import annotations

import json

import torch

STEPS = 2


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w1 = torch.nn.Linear(16, 64)
        self.w2 = torch.nn.Linear(64, 16)

    def forward(self, x):
        return self.w2(torch.relu(self.w1(x)))


def train(rank: int, world: int) -> dict:
    import torch_neuronx
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    dev = torch.device("neuron", rank)
    torch.neuron.set_device(dev)
    base = torch.neuron.memory_allocated(dev)
    torch.neuron.reset_peak_memory_stats(dev)
    with torch_neuronx.estimate() as est:
        mesh = init_device_mesh("neuron", (world // 2, 2), mesh_dim_names=("dp", "tp"))
        torch.manual_seed(0)
        model = parallelize_module(MLP().to(dev), mesh["tp"], {"w1": ColwiseParallel(), "w2": RowwiseParallel()})
        for layer in (model.w1, model.w2):
            fully_shard(layer, mesh=mesh["dp"])
        fully_shard(model, mesh=mesh["dp"])
        opt = torch.optim.AdamW(model.parameters(), lr=0.01)
        for _ in range(STEPS):
            loss = model(torch.randn(8, 16, device=dev)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        del model, opt, loss
    collectives = [(e.category, e.bytes, list(e.detail["ranks"])) for e in est.events if e.kind == "collective"]
    return {"peak": torch.neuron.max_memory_allocated(dev) - base, "collectives": collectives}


def train_and_write(rank: int, world: int, out_dir: str) -> None:
    """The real run's rank body (tests/distributed/dist_harness.run_ranks)."""
    with open(f"{out_dir}/rank{rank}.json", "w") as f:
        json.dump(train(rank, world), f)
