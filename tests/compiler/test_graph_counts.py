"""Every call of a compiled graph counts once in the stats page (neuron-top's graph counts), on the
core of the graph's inputs. The wrapper finds that core at the first call only (Dynamo guards the
inputs' devices), so later calls must still count, and on the same core."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from torch_neuronx.estimate._graphs import observe   # what the neuron backend returns for every graph
from torch_neuronx.tools.api import registry


def _graphs_per_core() -> dict[int, int]:
    from torch_neuronx import _C

    folder = Path(_C._stats_page_path()).parent
    entry = next(e for e in registry.list_processes(folder) if e.pid == os.getpid())
    return {i: d["graphs"] for i, d in entry.devices.items()}


@pytest.mark.parametrize("core", [0, 1])
def test_each_call_counts_on_the_inputs_core(core):
    assert torch.neuron.device_count() == 4   # one trn2 chip at LNC=2, the default topology
    x = torch.randn(8, 8, device=f"neuron:{core}")
    gm = torch.fx.symbolic_trace(lambda t: (t @ t).relu())
    f = observe(gm, gm, "tiny")   # a real compile would cost seconds: the wrapper is what counts
    before = _graphs_per_core()
    outs = [f(x) for _ in range(4)]
    after = _graphs_per_core()
    assert after.get(core, 0) - before.get(core, 0) == 4
    assert all(after[i] == before.get(i, 0) for i in after if i != core)
    assert all(torch.equal(o.cpu(), (x.cpu() @ x.cpu()).relu()) for o in outs)
