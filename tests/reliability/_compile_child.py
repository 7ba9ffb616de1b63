"""A process that compiles one tiny graph with the neuron backend and prints its result.

Run as `python -m tests.reliability._compile_child BARRIER WORLD [hold]`: with WORLD > 1
it waits until WORLD processes have reached the barrier folder, so their
compiles overlap (after the slow `import torch`). Prints COMPILING just before
the compile, then one RESULT line (JSON). With `hold`, the compile stops for good
after Inductor has written its cache entries and before they are sealed, and
prints WRITTEN: a test kills it there, at the worst moment, every time. test_signals_and_cache imports
`tiny_graph` and `tiny_input` so its own, later compile has the same key.
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch


def tiny_graph(x):
    return (torch.relu(x - 1) * x).cos().sum(1)


def tiny_input(device: str = "neuron"):
    return torch.arange(24.0).reshape(4, 6).to(device) / 7


def _wait_for(barrier: str, world: int) -> None:
    open(os.path.join(barrier, f"ready-{os.getpid()}"), "w").close()
    deadline = time.monotonic() + 120
    while len(os.listdir(barrier)) < world and time.monotonic() < deadline:
        time.sleep(0.01)


if __name__ == "__main__":
    import torch_neuronx.compiler as compiler

    barrier, world = sys.argv[1], int(sys.argv[2])
    if sys.argv[3:] == ["hold"]:
        from torch_neuronx.compiler import _cache as cache

        def _hold(root):
            print("WRITTEN", flush=True)
            time.sleep(3600)

        cache.seal_entries = _hold
    if world > 1:
        _wait_for(barrier, world)
    x = tiny_input()
    print("COMPILING", flush=True)
    out = torch.compile(tiny_graph, backend="neuron")(x)
    metrics = compiler.get_dynamo_metrics()
    print("RESULT" + json.dumps({"out": out.cpu().tolist(), "misses": metrics["cache_misses"],
                                 "disk_hits": metrics["cache_hits_disk"]}), flush=True)
