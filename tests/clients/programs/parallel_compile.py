"""DDP, FSDP2 and tensor parallel (DTensor) under `torch.compile`, with and without module buffers.

A plain torchrun program, the same on every device: `--device neuron` uses the "neuron" process group,
`--device cpu` gloo. Each case (`--cases ddp:neuron,fsdp2:eager,...`: wrapper and compile backend) trains a
tiny MLP for 2 SGD steps from the same seed; rank 0 also trains the unwrapped model eagerly on CPU on what
the ranks saw together (DDP/FSDP2: every rank's batch, TP: the one shared batch), which all three wrappers
must reproduce, and prints `RESULT {json}` with the losses and trained parameters (full tensors) of both.
Buffers matter: DDP broadcasts them before every forward (`broadcast_buffers=True`, the default), from
inside the compiled region, which is what Llama's rotary buffers hit in `run_clm.py --torch_compile`.

    torchrun --nproc_per_node 2 parallel_compile.py --device neuron
"""
from __future__ import annotations

import argparse
import json
import os

import torch
import torch.distributed as dist
from torch import nn


class Net(nn.Module):
    def __init__(self, buffers: bool):
        super().__init__()
        self.lin1 = nn.Linear(8, 16)
        self.lin2 = nn.Linear(16, 8)
        if buffers:
            self.register_buffer("scale", torch.linspace(0.5, 1.5, 8))

    def forward(self, x):
        y = self.lin2(torch.relu(self.lin1(x)))
        return y * self.scale if hasattr(self, "scale") else y


def _full(t: torch.Tensor) -> list:
    t = t.full_tensor() if hasattr(t, "full_tensor") else t
    return t.detach().cpu().flatten().tolist()


def _wrap(kind: str, model: nn.Module, device: torch.device, world: int) -> nn.Module:
    if kind == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model)
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(device.type, (world,))
    if kind == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        fully_shard(model.lin1, mesh=mesh)
        return fully_shard(model, mesh=mesh)
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    return parallelize_module(model, mesh, {"lin1": ColwiseParallel(), "lin2": RowwiseParallel()})


STEPS = 2


def _batches(kind: str, rank: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(100 + (0 if kind == "tp" else rank))  # TP: every rank sees one batch
    return [torch.randn(4, 8, generator=gen) for _ in range(STEPS)]


def reference(kind: str, buffers: bool, world: int) -> dict:
    """The same training in one process, eager, on CPU: data parallel = the mean over all ranks' rows."""
    torch.manual_seed(0)
    model = Net(buffers)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    per_rank = [_batches(kind, r) for r in range(1 if kind == "tp" else world)]
    losses = []
    for step in range(STEPS):
        loss = model(torch.cat([b[step] for b in per_rank])).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return {"losses": losses, "params": {n: _full(p) for n, p in model.named_parameters()}}


def train(kind: str, buffers: bool, device: torch.device, backend: str) -> dict:
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = Net(buffers).to(device)
    wrapped = _wrap(kind, model, device, world)
    compiled = torch.compile(wrapped, backend=backend)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for x in _batches(kind, rank):
        loss = compiled(x.to(device)).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        total = loss.detach().clone()
        dist.all_reduce(total)
        losses.append(total.item() / world)
    return {"losses": losses, "params": {n: _full(p) for n, p in model.named_parameters()}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="neuron", choices=["neuron", "cpu"])
    parser.add_argument("--cases", default="ddp:neuron,fsdp2:neuron,tp:neuron",
                        help="comma-separated wrapper:compile_backend (wrappers: ddp, fsdp2, tp)")
    args = parser.parse_args()
    dist.init_process_group("neuron" if args.device == "neuron" else "gloo")
    device = torch.device(args.device, int(os.environ["LOCAL_RANK"])) if args.device == "neuron" else torch.device("cpu")
    results = {}
    for case in args.cases.split(","):
        kind, backend = case.split(":")
        for buffers in (True, False):
            name = f"{kind}{'+buffers' if buffers else ''}"
            results[name] = train(kind, buffers, device, backend)
            if dist.get_rank() == 0:
                results[name]["cpu_reference"] = reference(kind, buffers, dist.get_world_size())
    if dist.get_rank() == 0:
        print("RESULT " + json.dumps(results), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
