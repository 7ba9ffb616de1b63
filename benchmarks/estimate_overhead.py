"""Cost of estimation: a transformer block forward+backward eager on neuron, estimation off vs on.

Prints the ratio on/off measured in the same run (target: on <= 1.3x; off costs nothing, since
no mode or hook is installed outside `torch_neuronx.estimate()`).
Run: python benchmarks/estimate_overhead.py
"""
import time

import torch

import torch_neuronx
from tests.estimate.test_eager import Block, _step


def _best(fns, reps=8):
    """Best time of each function, runs interleaved so load on a shared host hits all alike."""
    for fn in fns:
        fn()
    best = [float("inf")] * len(fns)
    for _ in range(reps):
        for i, fn in enumerate(fns):
            t = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - t)
    return best


def main():
    torch.manual_seed(0)
    model = Block(d=256, h=4).to("neuron")
    x = torch.randn(4, 128, 256, device="neuron")
    def off():
        _step(model, x)

    def on():
        with torch_neuronx.estimate():
            _step(model, x)

    def profiled():
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]):
            _step(model, x)

    def both():
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]), torch_neuronx.estimate():
            _step(model, x)
    off, est, prof, prof_est = _best([off, on, profiled, both])
    print(f"transformer block fwd+bwd eager: off {off * 1e3:.2f} ms, estimate on {est * 1e3:.2f} ms, "
          f"ratio {est / off:.2f}x (target <= 1.3x)")
    print(f"with torch.profiler (CPU activity): {prof * 1e3:.2f} ms, profiler + estimate "
          f"{prof_est * 1e3:.2f} ms, ratio {prof_est / prof:.2f}x")


if __name__ == "__main__":
    main()
