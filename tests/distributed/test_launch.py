"""Registration and launch: cheap registration, env:// under torchrun on one
and two (localhost) nodes, file:// and tcp:// (the latter used by the other
tests), current device = neuron:LOCAL_RANK from the start."""
from __future__ import annotations

import ast
import os

import torch
import torch.distributed as dist

from tests.conftest import run_python
from tests.distributed.dist_harness import run_ranks, run_torchrun

HERE = os.path.dirname(os.path.abspath(__file__))


def test_backend_registered_without_loading_process_group():
    r = run_python("""
        import sys, torch, torch.distributed as dist
        print(dist.Backend.NEURON, dist.Backend.default_device_backend_map["neuron"],
              dist.Backend.default_device_backend_map["cpu"], dist.Backend.backend_capability["neuron"],
              "torch_neuronx.distributed.process_group" in sys.modules,
              "torch.distributed.fsdp" in sys.modules)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["neuron", "neuron", "gloo", "['neuron',", "'cpu']", "False", "False"]


def test_backend_for_device():
    assert dist.Backend.default_device_backend_map["neuron"] == "neuron"
    assert "neuron" in dist.Backend.backend_list


def test_torchrun_two_nodes_env_init_and_local_rank_device():
    results = run_torchrun(os.path.join(HERE, "torchrun_worker.py"), nproc=2, nnodes=2,
                           env={"NEURON_RT_VISIBLE_CORES": ""}, timeout=240)
    for r in results:
        assert r.returncode == 0, r.stderr[-3000:]
    line = next(l for r in results for l in r.stdout.splitlines() if l.startswith("INFO"))
    info = ast.literal_eval(line[len("INFO "):])
    assert [i[0] for i in info] == [0, 1, 2, 3]
    assert [i[1] for i in info] == [0, 1, 0, 1]                    # LOCAL_RANK per node
    assert sorted({i[2] for i in info}) == ["0", "1"]              # two nodes
    assert [i[3] for i in info] == [0, 1, 0, 1]                    # current_device() from the start
    assert [i[4] for i in info] == [0, 1, 0, 1]                    # torch.accelerator agrees
    assert len({i[5] for i in info}) == 1 and info[0][5] > 2       # all cores visible


def _file_init(rank, world):
    t = torch.ones(2, device=torch.device("neuron", rank))
    dist.all_reduce(t)
    assert t.cpu().tolist() == [2.0, 2.0]


def test_file_init():
    run_ranks(_file_init, 2, init="file")
