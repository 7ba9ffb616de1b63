"""Claim: the cross-rank collective check (on for every call of a group's life
by default) costs one small all_gather per collective: measured here per call
at 1 KiB and 64 MiB, on 2 and 4 local ranks.

Both sides run in the same processes, on neuron tensors: one group with the
check on (the default) and one with TORCH_NEURONX_COLLECTIVE_CHECKS=0. The two
sides alternate call by call (the order flips every call, so load from other
processes hits both alike); each repeat takes the slowest rank's mean time per
call, and the figures are medians over repeats: the extra microseconds per call
and the paired time ratio checked/unchecked. Reported, no target; exits 0.

    python benchmarks/collective_check_overhead.py            # 2 and 4 ranks, ~1-2 min
    python benchmarks/collective_check_overhead.py --ranks 2 --repeats 3
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import time
from datetime import timedelta

from torch_neuronx.runtime.units import size

SIZES = [1 << 10, 64 << 20]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, repeats, queue):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ.pop("TORCH_NEURONX_COLLECTIVE_CHECKS", None)
    dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=timedelta(seconds=120))
    checked = dist.new_group(backend="neuron")
    os.environ["TORCH_NEURONX_COLLECTIVE_CHECKS"] = "0"  # read when a group is created
    unchecked = dist.new_group(backend="neuron")
    dev = torch.device("neuron", rank)
    rows = []
    for nbytes in SIZES:
        t = torch.ones(nbytes // 4, device=dev)
        iters = 200 if nbytes <= 1 << 20 else 4
        fns = {"checked": lambda: dist.all_reduce(t, group=checked),
               "unchecked": lambda: dist.all_reduce(t, group=unchecked)}
        for fn in fns.values():
            fn()
        samples = {"checked": [], "unchecked": []}
        for _ in range(repeats):
            totals = dict.fromkeys(fns, 0.0)
            for i in range(iters):
                order = tuple(fns) if i % 2 == 0 else tuple(reversed(tuple(fns)))
                for side in order:
                    start = time.perf_counter()
                    fns[side]()
                    totals[side] += time.perf_counter() - start
            for side in fns:
                # the slowest rank's mean decides the repeat
                mean = torch.tensor([totals[side] / iters], dtype=torch.float64)
                dist.all_reduce(mean, op=dist.ReduceOp.MAX, group=unchecked)
                samples[side].append(mean.item())
        rows.append((nbytes, samples["checked"], samples["unchecked"]))
    if rank == 0:
        queue.put(rows)
    dist.destroy_process_group()


def run(world: int, repeats: int):
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, world, port, repeats, queue)) for r in range(world)]
    for p in procs:
        p.start()
    rows = queue.get(timeout=600)
    for p in procs:
        p.join(60)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="*", default=[2, 4])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"{'ranks':>5} {'size':>7} {'checked us':>11} {'unchecked us':>13} {'extra us':>9} {'ratio':>6}")
    for world in args.ranks:
        for nbytes, checked, unchecked in run(world, args.repeats):
            c, u = statistics.median(checked), statistics.median(unchecked)
            ratio = statistics.median(a / b for a, b in zip(checked, unchecked))
            print(f"{world:>5} {size(nbytes, 0):>7} {c * 1e6:>11.1f} {u * 1e6:>13.1f} {(c - u) * 1e6:>9.1f} {ratio:>6.2f}")


if __name__ == "__main__":
    main()
