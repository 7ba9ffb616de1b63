"""Collectives on neuron tensors (2 ranks, process group "neuron") are estimated per rank,
c10d and functional collectives alike, and the critical path accounts for ranks waiting."""
import torch
import torch.distributed as dist

from tests.distributed.dist_harness import run_ranks


def _ranks(rank, world):
    import torch.distributed._functional_collectives as fc

    import torch_neuronx
    t = torch.ones(1024, device="neuron")
    with torch_neuronx.estimate("trn2.3xlarge") as est:
        dist.all_reduce(t)
        out = torch.empty(2048, device="neuron")
        dist.all_gather_into_tensor(out, t)
        dist.reduce_scatter_tensor(t, out)
        f = fc.all_reduce(t, "sum", dist.group.WORLD)
        f = fc.wait_tensor(f)
        if rank == 1:       # rank 1 computes more before the last collective: rank 0 waits for it
            a = torch.randn(256, 256, device="neuron")
            for _ in range(4):
                a = a @ a
        dist.barrier()
    assert torch.equal(t.cpu(), torch.full((1024,), 4.0)) and torch.equal(f.cpu(), torch.full((1024,), 8.0))
    kinds = [e.category for e in est.events if e.kind == "collective"]
    assert kinds == ["collective:all_reduce", "collective:all_gather", "collective:reduce_scatter",
                     "collective:all_reduce", "collective:barrier"], kinds
    ar = est.events[0]
    assert ar.bytes == 4096 and ar.detail["group_size"] == 2 and ar.detail["placement"] == "chip"
    assert est.rank == rank and est.world_size == 2
    assert est.by_category()["collective:all_reduce"] > 0
    cp = est.critical_path()
    assert cp["critical_path_s"] >= max(cp["total_s"])
    assert cp["wait_s"][0] > cp["wait_s"][1] >= 0


def test_collectives_estimated_per_rank():
    run_ranks(_ranks, 2)
