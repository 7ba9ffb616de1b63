"""Collectives on neuron tensors (2 ranks, process group "neuron") are estimated per rank."""
import torch
import torch.distributed as dist

from tests.distributed.dist_harness import run_ranks


def _ranks(rank, world):
    import torch_neuronx
    t = torch.ones(1024, device="neuron")
    with torch_neuronx.estimate("trn2.3xlarge") as est:
        dist.all_reduce(t)
        out = torch.empty(2048, device="neuron")
        dist.all_gather_into_tensor(out, t)
        dist.reduce_scatter_tensor(t, out)
    assert torch.equal(t.cpu(), torch.full((1024,), 4.0)), t.cpu()[:4]
    kinds = [e.category for e in est.events if e.kind == "collective"]
    assert kinds == ["collective:all_reduce", "collective:all_gather", "collective:reduce_scatter"], kinds
    ar = est.events[0]
    assert ar.bytes == 4096 and ar.detail["group_size"] == 2 and ar.detail["placement"] == "chip"
    assert est.rank == rank and est.world_size == 2
    assert est.by_category()["collective:all_reduce"] > 0


def test_collectives_estimated_per_rank():
    run_ranks(_ranks, 2)
