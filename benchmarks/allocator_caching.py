"""Claim: the caching allocator is no slower than the allocator before it, and
takes fewer page faults per step.

The two sides are the caching allocator (default) and the pre-cache allocator
(`TORCH_NEURONX_NO_MEMORY_CACHING=1`: every allocation its own host allocation,
returned when freed; host-kernel outputs adopted from the CPU allocator). The
variable only calls `torch_neuronx._C._set_allocator_no_caching(True)` at
runtime start, so one process can switch between the two with that same call:
by default one process runs paired rounds, caching and pre-cache back to back
(the order alternating), so both sides see the same host load; each side is
warmed up after every switch. `--processes` instead runs each side in fresh
processes started with and without the variable (alternating, best of two).
Workloads:

* an eager transformer encoder block (d=256, 4 heads, B8 T64), forward + backward;
* allocation-heavy tiny ops: 200 x ((a + b) * c).relu() on (16,) tensors.

Printed per workload: ms per step for each allocator (wall and process CPU
time), the caching/pre-cache ratio of each (medians of the per-round ratios;
target <= 1.0, i.e. no slower), and minor page faults per step (getrusage).
On a shared host whose load exceeds its cores, wall time mostly measures the
other processes: the verdict then uses the CPU-time ratio (both are printed,
with the load average). Intra-op threads default to 1 (`--threads`), so that
process CPU time is not inflated by worker threads spinning on a loaded host.

    python benchmarks/allocator_caching.py            # ~1 min
    python benchmarks/allocator_caching.py --quick
    python benchmarks/allocator_caching.py --processes
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time, torch
from torch_neuronx import _C
steps, rounds, threads, sides = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split(",")
torch.set_num_threads(threads)
torch.manual_seed(0)
block = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True, dropout=0.0).to("neuron")
x = torch.randn(8, 64, 256, device="neuron")
def transformer():
    block(x).square().mean().backward()
a, b, c = (torch.randn(16, device="neuron") for _ in range(3))
def tiny():
    for _ in range(200):
        ((a + b) * c).relu()
def measure(fn):
    for _ in range(2):
        fn()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t, p = time.perf_counter(), time.process_time()
    for _ in range(steps):
        fn()
    return {"ms": (time.perf_counter() - t) / steps * 1e3, "cpu_ms": (time.process_time() - p) / steps * 1e3,
            "faults": (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / steps}
results = []
for r in range(rounds):
    order = sides if r % 2 == 0 else sides[::-1]
    row = {}
    for name, fn in (("transformer block fwd+bwd", transformer), ("200 tiny ops", tiny)):
        for side in order:
            if len(sides) > 1:
                _C._set_allocator_no_caching(side == "pre-cache")
            row.setdefault(side, {})[name] = measure(fn)
    results.append(row)
print(json.dumps(results))
"""


def child(sides: list[str], steps: int, rounds: int, threads: int, no_caching_env: bool) -> list[dict]:
    env = dict(os.environ)
    env.pop("TORCH_NEURONX_NO_MEMORY_CACHING", None)
    if no_caching_env:
        env["TORCH_NEURONX_NO_MEMORY_CACHING"] = "1"
    out = subprocess.run([sys.executable, "-c", CHILD, str(steps), str(rounds), str(threads), ",".join(sides)],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--processes", action="store_true", help="each side in fresh processes (env variable)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    steps = 2 if args.quick else 5
    rounds = 2 if args.quick else 6
    load_before = os.getloadavg()[0]
    if args.processes:
        rows = []
        for _ in range(1 if args.quick else 2):
            row = {}
            for side, flag in (("pre-cache", True), ("caching", False)):
                row.update(child([side], steps * 2, 1, args.threads, flag)[0])
            rows.append(row)
    else:
        rows = child(["caching", "pre-cache"], steps, rounds, args.threads, False)
    load = max(load_before, os.getloadavg()[0])
    cores = os.cpu_count() or 1
    by_cpu = load > cores
    print(f"host load average (1 min) up to {load:.1f} on {cores} cores; intra-op threads {args.threads}; "
          f"{len(rows)} {'process pairs' if args.processes else 'paired rounds'} of {steps} steps")
    print(f"{'workload':<27}{'pre-cache ms':>13}{'caching ms':>11}{'ratio':>7}{'pre cpu ms':>11}"
          f"{'cache cpu ms':>13}{'cpu ratio':>10}{'faults pre':>11}{'faults cache':>13}")
    for name in rows[0]["caching"]:
        old = [r["pre-cache"][name] for r in rows]
        new = [r["caching"][name] for r in rows]
        med = lambda side, key: statistics.median(s[key] for s in side)  # noqa: E731
        ratio = statistics.median(n["ms"] / o["ms"] for n, o in zip(new, old))
        cpu_ratio = statistics.median(n["cpu_ms"] / o["cpu_ms"] for n, o in zip(new, old))
        judged = cpu_ratio if by_cpu else ratio
        verdict = "PASS" if judged <= 1.0 else "MISS"
        print(f"{name:<27}{med(old, 'ms'):>13.3f}{med(new, 'ms'):>11.3f}{ratio:>7.2f}{med(old, 'cpu_ms'):>11.3f}"
              f"{med(new, 'cpu_ms'):>13.3f}{cpu_ratio:>10.2f}{med(old, 'faults'):>11.1f}{med(new, 'faults'):>13.1f}"
              f"  {verdict} ({'cpu ' if by_cpu else ''}ratio <= 1.0)")


if __name__ == "__main__":
    main()
