"""Claim: publishing op counts and busy time costs under 0.1 us per op.

What every op pays for the tools (csrc/op_tracking.cpp, OpScope): a lock-free
table lookup, one relaxed atomic add for the op count, two reads of the CPU's
time-stamp counter (the steady clock where the kernel does not keep time with
it) and two relaxed adds into the mapped stats page. Measured two ways in one run:

1. directly: the time of one OpScope in a tight C++ loop (`_measure_op_scope_ns`),
   as wall time and as the thread's CPU time (on a shared, loaded host the wall
   figure includes the time other processes ran; the verdict uses the CPU time,
   and both are printed);
2. end to end: a tiny in-place add per op with the stats page mapped, against a
   process whose page cannot be created (TORCH_NEURONX_RUNTIME_DIR unwritable:
   the page adds are skipped; the lookup, count and clock reads remain).

    python benchmarks/op_tracking_cost.py     # ~30 s
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

CHILD = r"""
import json, statistics, time, torch
from torch_neuronx import _C
a = torch.randn(16, device="neuron"); b = torch.randn(16, device="neuron")
for _ in range(2000): a.add_(b)
runs = []
for _ in range(15):
    t = time.perf_counter()
    for _ in range(20000): a.add_(b)
    runs.append((time.perf_counter() - t) / 20000)
scopes = [_C._measure_op_scope_ns(1_000_000) for _ in range(5)]
print(json.dumps({"us": statistics.median(runs) * 1e6, "page": bool(_C._stats_page_path()),
                  "scope_wall_ns": min(w for w, _ in scopes), "scope_cpu_ns": min(c for _, c in scopes)}))
"""
TARGET_US = 0.1


def run(runtime_dir: str | None) -> dict:
    env = dict(os.environ)
    if runtime_dir is not None:
        env["TORCH_NEURONX_RUNTIME_DIR"] = runtime_dir
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    with_page, without = [], []
    for _ in range(3):  # alternate; keep the best of each
        with_page.append(run(None))
        without.append(run("/proc/no-such-dir"))
    assert all(r["page"] for r in with_page) and not any(r["page"] for r in without)
    scope = min(r["scope_cpu_ns"] for r in with_page)
    wall = min(r["scope_wall_ns"] for r in with_page)
    w, wo = min(r["us"] for r in with_page), min(r["us"] for r in without)
    print(f"host load average (1 min): {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"OpScope (count + busy time + page adds): {scope:.1f} ns CPU per op ({wall:.1f} ns wall)  "
          f"{'PASS' if scope / 1000 < TARGET_US else 'MISS'} (target < {TARGET_US} us)")
    print(f"tiny in-place add: {w:.3f} us per op with the page, {wo:.3f} us without "
          f"(difference {1000 * (w - wo):+.0f} ns, within run-to-run noise when small)")


if __name__ == "__main__":
    main()
