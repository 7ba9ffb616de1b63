"""Functional collectives (`torch.distributed._functional_collectives`, the
`_c10d_functional` ops) on neuron tensors, eagerly and inside torch.compile."""
from __future__ import annotations

import torch
import torch.distributed as dist

from tests.distributed.dist_harness import run_ranks


def _step(x, group):
    import torch.distributed._functional_collectives as fc

    a = fc.all_reduce(x * 2, "sum", group)
    g = fc.all_gather_tensor(a + 1, 0, group)
    r = fc.reduce_scatter_tensor(g, "avg", 0, group)
    s = fc.all_to_all_single(r, None, None, group)
    return fc.wait_tensor(s) + torch.ops._c10d_functional.wait_tensor(
        torch.ops._c10d_functional.broadcast(x.clone(), 0, dist.group.WORLD.group_name))


def _functional(rank, world, backends):
    from torch.distributed.device_mesh import init_device_mesh

    dev = torch.device("neuron", rank)
    mesh = init_device_mesh("neuron", (world,))
    x = (torch.arange(4.0) + rank).to(dev)
    eager = _step(x, mesh)
    assert eager.device == dev
    # Closed form, on CPU: rank r holds x_r = arange(4) + r. The all-reduce gives
    # a = 2 * sum_r x_r on every rank, the all-gather [a + 1] * world, its averaged reduce-scatter
    # a + 1 again, and the all-to-all hands rank k chunk k of every rank's (equal) a + 1; the
    # broadcast adds rank 0's x_0 = arange(4).
    base = torch.arange(4.0)
    a = 2 * (world * base + world * (world - 1) / 2)
    chunk = 4 // world
    expected = torch.cat([(a + 1)[rank * chunk:(rank + 1) * chunk]] * world) + base
    torch.testing.assert_close(eager.cpu(), expected)
    for backend in backends:
        torch._dynamo.reset()
        compiled = torch.compile(_step, backend=backend, fullgraph=True)
        out = compiled(x, mesh)
        assert out.device == dev, backend
        torch.testing.assert_close(out.cpu(), expected, msg=lambda m, b=backend: f"{b}: {m}")


def test_functional_collectives_eager_and_aot_eager():
    run_ranks(_functional, 2, ["aot_eager"], init="file")


def test_functional_collectives_in_neuron_compiled_graph():
    run_ranks(_functional, 2, ["neuron"])
