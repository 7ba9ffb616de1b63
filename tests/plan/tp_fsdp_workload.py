"""The TP2 x FSDP2 training workload both sides of the exactness test run: a 2-layer MLP, tensor
parallel inside each pair of ranks (DTensor), FSDP2 across pairs, AdamW, two steps; eager, or with
its activation compiled by the neuron backend (a pointwise chain on the TP-local hidden tensor,
whose intermediates Inductor fuses away: the compiled run's peak is smaller than op by op).

`train(rank, world, compiled)` returns this rank's peak device memory above what the core held
before, and its collectives as the estimate layer recorded them (kind, bytes, group ranks), in
call order.
"""
from __future__ import annotations

import gc
import json

import torch

STEPS = 2
# compiled: activations large enough that their fusion shows in the peak
BATCH, HIDDEN = {False: 8, True: 128}, {False: 64, True: 1024}


def gated(h):
    return h * torch.sigmoid(h) + torch.tanh(h) * 0.5


class MLP(torch.nn.Module):
    def __init__(self, act, hidden: int) -> None:
        super().__init__()
        self.w1 = torch.nn.Linear(16, hidden)
        self.w2 = torch.nn.Linear(hidden, 16)
        self.act = act

    def forward(self, x):
        return self.w2(self.act(self.w1(x)))


def train(rank: int, world: int, compiled: bool = False) -> dict:
    import torch_neuronx
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    dev = torch.device("neuron", rank)
    torch.neuron.set_device(dev)
    gc.collect()   # earlier work's cycles must not be freed inside the measured region
    base = torch.neuron.memory_allocated(dev)
    torch.neuron.reset_peak_memory_stats(dev)
    if compiled:
        torch._dynamo.reset()   # one rank after another in the dry-run test: each compiles for its core
    act = torch.compile(gated, backend="neuron") if compiled else torch.relu
    with torch_neuronx.estimate() as est:
        mesh = init_device_mesh("neuron", (world // 2, 2), mesh_dim_names=("dp", "tp"))
        torch.manual_seed(0)
        model = parallelize_module(MLP(act, HIDDEN[compiled]).to(dev), mesh["tp"], {"w1": ColwiseParallel(), "w2": RowwiseParallel()})
        for layer in (model.w1, model.w2):
            fully_shard(layer, mesh=mesh["dp"])
        fully_shard(model, mesh=mesh["dp"])
        opt = torch.optim.AdamW(model.parameters(), lr=0.01)
        for _ in range(STEPS):
            loss = model(torch.randn(BATCH[compiled], 16, device=dev)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        del model, opt, loss
    collectives = [(e.category, e.bytes, list(e.detail["ranks"])) for e in est.events if e.kind == "collective"]
    graphs = sum(1 for e in est.events if e.kind == "graph")
    return {"peak": torch.neuron.max_memory_allocated(dev) - base, "collectives": collectives, "graphs": graphs}


def train_and_write(rank: int, world: int, out_dir: str) -> None:
    """The real run's rank body (tests/distributed/dist_harness.run_ranks): eager, then compiled."""
    result = {mode: train(rank, world, compiled=mode == "compiled") for mode in ("eager", "compiled")}
    with open(f"{out_dir}/rank{rank}.json", "w") as f:
        json.dump(result, f)
