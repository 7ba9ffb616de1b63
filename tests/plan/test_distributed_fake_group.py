"""The dry run's process group, one rank alone in a world of 4: each collective returns at once with
correctly shaped outputs, leaves them as torch's FakeProcessGroup does, checks shapes as NCCL does, and
is recorded by the estimate with its bytes and the global ranks of its group."""
from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

import torch_neuronx
from tests.plan.dry_rank import dry_rank

WORLD, RANK = 4, 3


def _collectives(est):
    return [(e.category.split(":")[1], e.bytes, list(e.detail["ranks"])) for e in est.events
            if e.kind == "collective"]


def test_every_collective_completes_alone_and_is_recorded(monkeypatch):
    dev = torch.device("neuron", RANK)
    with dry_rank(monkeypatch, RANK, WORLD):
        pair = dist.new_group([1, 3])
        x = torch.arange(4, dtype=torch.float32, device=dev)
        with torch_neuronx.estimate() as est:
            dist.all_reduce(x)                                   # untouched: this rank's own values
            gathered = torch.full((16,), -1.0, device=dev)
            dist.all_gather_into_tensor(gathered, x)             # every chunk: this rank's input
            parts = [torch.empty(4, device=dev) for _ in range(2)]
            dist.all_gather(parts, x, group=pair)
            out = torch.full((1,), 7.0, device=dev)
            dist.reduce_scatter_tensor(out, x)                   # untouched
            dist.broadcast(x, src=0)
            a2a = torch.full((4,), 5.0, device=dev)
            dist.all_to_all_single(a2a, x)                      # even split: each peer sends this rank its own chunk
            dist.send(x, dst=0)
            dist.recv(x, src=0)
            with dist._coalescing_manager(async_ops=True) as cm:    # as FSDP2 and DDP issue them
                dist.all_reduce(x)
                dist.all_reduce(out)
            cm.wait()
            dist.barrier()   # returns: no peer to wait for
        assert x.tolist() == [0.0, 1.0, 2.0, 3.0]
        assert gathered.tolist() == [0.0, 1.0, 2.0, 3.0] * 4
        assert [p.tolist() for p in parts] == [[0.0, 1.0, 2.0, 3.0]] * 2
        assert out.tolist() == [7.0] and a2a.tolist() == [3.0] * 4   # x[RANK] from each of the 4
        everyone = [0, 1, 2, 3]
        assert _collectives(est) == [
            ("all_reduce", 16, everyone), ("all_gather", 64, everyone), ("all_gather", 32, [1, 3]),
            ("reduce_scatter", 16, everyone), ("broadcast", 16, everyone), ("all_to_all", 16, everyone),
            ("send", 16, everyone), ("recv", 16, everyone),
            ("all_reduce", 20, everyone),   # the coalesced pair: one allreduce_coalesced of both tensors
            ("barrier", 0, everyone)]
        objects = [None] * WORLD
        dist.all_gather_object(objects, {"rank": RANK})     # CPU bytes are real: copies of this rank's
        assert objects == [{"rank": RANK}] * WORLD


def test_shapes_are_checked_as_on_trainium(monkeypatch):
    dev = torch.device("neuron", RANK)
    with dry_rank(monkeypatch, RANK, WORLD):
        with pytest.raises(ValueError, match="world_size x input.numel"):
            dist.all_gather_into_tensor(torch.empty(6, device=dev), torch.empty(2, device=dev))
        with pytest.raises(ValueError, match="world_size x output.numel"):
            dist.reduce_scatter_tensor(torch.empty(2, device=dev), torch.empty(4, device=dev))


def test_tcp_rendezvous_needs_no_server(monkeypatch):
    """init_method="tcp://..." with nobody listening: the dry run's rendezvous never connects."""
    from torch_neuronx.plan.distributed import _rendezvous as rendezvous

    monkeypatch.setenv("TORCH_NEURONX_DRY_RUN", "1")
    rendezvous.install()
    try:
        dist.init_process_group("neuron", init_method="tcp://127.0.0.1:9", rank=2, world_size=64)
        assert (dist.get_rank(), dist.get_world_size()) == (2, 64)
        with pytest.raises(RuntimeError, match="has no peers"):
            dist.distributed_c10d._get_default_store().set("k", "v")
    finally:
        dist.destroy_process_group()
        rendezvous.uninstall()
