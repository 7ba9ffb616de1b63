"""Claim: `torch.neuron.Event.elapsed_time` reports the host time between two records.

Records an event pair around `time.sleep(ms)` for a few durations, interleaved,
and prints the median of elapsed_time / perf_counter wall time per duration.
Target: every median ratio within 5% of 1. Prints PASS/MISS, always exits 0 (the
unit test checks only that the figure lies between the work and the wall time
around the records).

    python benchmarks/event_timing.py             # 10 rounds, about 2 s
    python benchmarks/event_timing.py --rounds 30
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

DURATIONS_MS = (1.0, 10.0, 50.0)
TOLERANCE = 0.05


def one(ms: float) -> float:
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    t = time.perf_counter()
    start.record()
    time.sleep(ms / 1e3)
    end.record()
    wall = (time.perf_counter() - t) * 1e3
    end.synchronize()
    return start.elapsed_time(end) / wall


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="rounds per duration (default 10)")
    args = parser.parse_args(argv)
    ratios = {ms: [] for ms in DURATIONS_MS}
    for _ in range(args.rounds):
        for ms in DURATIONS_MS:
            ratios[ms].append(one(ms))
    worst = 0.0
    for ms, values in ratios.items():
        median = statistics.median(values)
        worst = max(worst, abs(median - 1))
        print(f"sleep {ms:5.1f} ms: elapsed_time / wall time median {median:.4f} "
              f"(min {min(values):.4f}, max {max(values):.4f})")
    verdict = "PASS" if worst <= TOLERANCE else "MISS"
    print(f"worst |ratio - 1| = {worst:.4f}; target <= {TOLERANCE}: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
