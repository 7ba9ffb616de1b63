"""A compiled graph of DTensor ops (torch's tensor-parallel styles, as torchtitan and sequence
parallelism apply them) is costed on each core's shards, as the eager estimate costs the same ops:
a column- then row-parallel MLP over 4 ranks does a quarter of the matmul FLOPs per core."""
import torch
import torch.distributed as dist
from torch import nn

import torch_neuronx


def test_a_compiled_tensor_parallel_graph_is_costed_on_each_cores_shard():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    from torch.testing._internal.distributed.fake_pg import FakeStore

    tokens, width, hidden, ranks = 64, 256, 1024, 4
    dist.init_process_group(backend="neuron:fake,cpu:fake", store=FakeStore(), rank=0, world_size=ranks)
    try:
        mesh = init_device_mesh("neuron", (ranks,))
        mlp = nn.Sequential(nn.Linear(width, hidden, bias=False), nn.ReLU(),
                            nn.Linear(hidden, width, bias=False)).to("neuron")
        parallelize_module(mlp, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
        x = torch.randn(tokens, width, device="neuron")
        with torch.no_grad():
            compiled = torch.compile(mlp, backend="neuron")
            compiled(x)                                    # compiles
            with torch_neuronx.estimate() as eager:
                mlp(x)
            with torch_neuronx.estimate() as graph:
                compiled(x)
    finally:
        dist.destroy_process_group()
        torch._dynamo.reset()
    per_core = 2 * tokens * width * hidden * 2 // ranks     # two matmuls, a quarter of each
    graphs = [e for e in graph.events if e.kind == "graph"]
    assert graphs, [e.kind for e in graph.events]
    assert sum(e.flops for e in graphs) == per_core
    assert sum(e.flops for e in eager.events if e.name == "aten.mm") == per_core
