"""Claim: an FSDP2 training step of a small model on 2 ranks with neuron tensors
(backend "neuron") runs at least 0.9x as fast as the same step on CPU tensors
with gloo.

Both sides run in the same processes: one model sharded with `fully_shard` over
the default "neuron" group on neuron:RANK, a copy sharded over a gloo group on
CPU (`DeviceMesh.from_group`). Steps alternate between the two sides; the
figure is the median of paired neuron/CPU step-time ratios (slowest rank).
Prints PASS/MISS and always exits 0.

    python benchmarks/collectives_fsdp2_step.py            # ~1 min
    python benchmarks/collectives_fsdp2_step.py --steps 10
"""
from __future__ import annotations

import argparse
import copy
import os
import socket
import statistics
import time
from datetime import timedelta

TARGET = 0.9  # neuron speed / CPU-gloo speed


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, steps, dim, layers, queue):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    from torch.distributed.fsdp import fully_shard

    torch.set_num_threads(1)
    dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=timedelta(seconds=120))
    gloo = dist.new_group(backend="gloo")
    torch.manual_seed(0)
    base = nn.Sequential(*[nn.Sequential(nn.Linear(dim, dim), nn.GELU()) for _ in range(layers)])
    sides = {}
    for side, device, mesh in (
        ("neuron", torch.device("neuron", rank), init_device_mesh("neuron", (world,))),
        ("cpu", torch.device("cpu"), DeviceMesh.from_group(gloo, "cpu")),
    ):
        model = copy.deepcopy(base).to(device)
        for block in model:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x = torch.randn(16, dim, generator=torch.Generator().manual_seed(rank)).to(device)

        def step(model=model, opt=opt, x=x):
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss.item()

        for _ in range(5):  # warm-up (the cross-rank check runs on every collective, as in a real job)
            step()
        sides[side] = step
    times = {"neuron": [], "cpu": []}
    for i in range(steps):
        order = ("neuron", "cpu") if i % 2 == 0 else ("cpu", "neuron")
        for side in order:
            dist.barrier(group=gloo)
            start = time.perf_counter()
            sides[side]()
            elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
            dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=gloo)
            times[side].append(elapsed.item())
    if rank == 0:
        queue.put(times)
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--layers", type=int, default=4)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch.multiprocessing as mp

    queue = mp.get_context("spawn").SimpleQueue()
    mp.start_processes(_worker, args=(2, _free_port(), args.steps, args.dim, args.layers, queue),
                       nprocs=2, start_method="spawn")
    times = queue.get()
    ratio = statistics.median(c / n for n, c in zip(times["neuron"], times["cpu"]))
    t_n, t_c = statistics.median(times["neuron"]), statistics.median(times["cpu"])
    print(f"FSDP2 step, 2 ranks, {args.layers} x Linear({args.dim}, {args.dim}) + AdamW, batch 16:")
    print(f"  neuron (backend neuron): {t_n * 1e3:8.1f} ms")
    print(f"  cpu    (backend gloo):   {t_c * 1e3:8.1f} ms")
    print(f"  speed ratio neuron/cpu:  {ratio:8.2f}  target >= {TARGET}  "
          f"{'PASS' if ratio >= TARGET else 'MISS'}")


if __name__ == "__main__":
    main()
