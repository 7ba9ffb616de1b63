"""Claim: collectives on neuron tensors (backend "neuron") run at least 0.9x as
fast as gloo on plain CPU tensors, for all_reduce and all_gather_into_tensor
from 1 KiB to 64 MiB, on 2 and 4 local ranks.

Both sides run in the same processes: the default group is backend "neuron"
(neuron tensors, moved by gloo over CPU views of the same bytes), and a second
group with backend "gloo" works on CPU tensors of the same size. For each size
the two sides alternate call by call (the order flips every call, so load from
other processes on a shared machine hits both alike); each repeat takes the
slowest rank's mean time per call, and the figure is the median of the paired
neuron/gloo time ratios (bus bandwidth is reported from the median times). It prints PASS/MISS per row and always exits 0.

    python benchmarks/collectives_bandwidth.py                 # 2 and 4 ranks, ~2-4 min
    python benchmarks/collectives_bandwidth.py --ranks 2 --quick
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import time
from datetime import timedelta

from torch_neuronx.runtime.units import size

TARGET = 0.9  # neuron bandwidth / gloo bandwidth, at every size
SIZES = [1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _paired_times(fns, iters):
    """Alternate the sides call by call; returns the mean time per call of each."""
    totals = {side: 0.0 for side in fns}
    clock = time.perf_counter
    for i in range(iters):
        order = tuple(fns) if i % 2 == 0 else tuple(reversed(tuple(fns)))
        for side in order:
            fn = fns[side]
            start = clock()
            fn()
            totals[side] += clock() - start
    return {side: total / iters for side, total in totals.items()}


def _worker(rank, world, port, sizes, repeats, queue):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    # The transport alone: the cross-rank check (on for every call by default)
    # is measured separately, in collective_check_overhead.py.
    os.environ["TORCH_NEURONX_COLLECTIVE_CHECKS"] = "0"
    dist.init_process_group("neuron", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=timedelta(seconds=120))
    gloo = dist.new_group(backend="gloo")
    dev = torch.device("neuron", rank)
    for _ in range(8):  # warm-up
        dist.all_reduce(torch.ones(1, device=dev))
    rows = []
    for nbytes in sizes:
        numel = nbytes // 4
        iters = max(10, min(100, (8 << 20) // nbytes))  # >= 10 calls so one stall cannot decide a repeat
        for coll in ("all_reduce", "all_gather"):
            bufs = {}
            for side, device, group in (("neuron", dev, None), ("gloo", "cpu", gloo)):
                if coll == "all_reduce":
                    t = torch.ones(numel, device=device)
                    fn = (lambda t=t, g=group: dist.all_reduce(t, group=g))
                else:  # nbytes is the gathered (output) size
                    inp = torch.ones(max(1, numel // world), device=device)
                    out = torch.empty(inp.numel() * world, device=device)
                    fn = (lambda o=out, i=inp, g=group: dist.all_gather_into_tensor(o, i, group=g))
                bufs[side] = fn
                fn()  # warm-up
            times = {"neuron": [], "gloo": []}
            # small messages are cheap and the noisiest (scheduler latency): twice the repeats
            for _ in range(repeats * 2 if nbytes <= 1 << 20 else repeats):
                dist.barrier(group=gloo)
                per_call = _paired_times(bufs, iters)
                # every rank needs the slowest rank's figure for a fair ratio
                both = torch.tensor([per_call["neuron"], per_call["gloo"]], dtype=torch.float64)
                dist.all_reduce(both, op=dist.ReduceOp.MAX, group=gloo)
                times["neuron"].append(both[0].item())
                times["gloo"].append(both[1].item())
            ratio = statistics.median(g / n for n, g in zip(times["neuron"], times["gloo"]))
            t_n, t_g = statistics.median(times["neuron"]), statistics.median(times["gloo"])
            factor = 2 * (world - 1) / world if coll == "all_reduce" else (world - 1) / world
            rows.append((coll, nbytes, factor * nbytes / t_n / 1e9, factor * nbytes / t_g / 1e9, ratio))
    if rank == 0:
        queue.put(rows)
    dist.destroy_process_group()


def run(world: int, sizes, repeats: int) -> int:
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.start_processes(_worker, args=(world, _free_port(), sizes, repeats, queue), nprocs=world,
                       start_method="spawn")
    rows = queue.get()
    misses = 0
    print(f"\n{world} ranks: bus bandwidth GB/s (neuron tensors, backend neuron) vs gloo on CPU tensors")
    print(f"{'collective':<12}{'size':>8}{'neuron':>10}{'gloo':>10}{'ratio':>8}  target >= {TARGET}")
    for coll, nbytes, bw_n, bw_g, ratio in rows:
        ok = ratio >= TARGET
        misses += not ok
        print(f"{coll:<12}{size(nbytes, 0):>8}{bw_n:>10.3f}{bw_g:>10.3f}{ratio:>8.2f}  {'PASS' if ok else 'MISS'}")
    return misses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="*", default=[2, 4])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="1 KiB, 64 KiB, 4 MiB only; 3 repeats")
    args = parser.parse_args()
    sizes = [1 << 10, 64 << 10, 4 << 20] if args.quick else SIZES
    repeats = 3 if args.quick else args.repeats
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    misses = sum(run(world, sizes, repeats) for world in args.ranks)
    print(f"\n{misses} row(s) below target")


if __name__ == "__main__":
    main()
