"""The PyTorch parallelism stack on neuron tensors over backend "neuron", each
checked against a single-process CPU reference (same losses and weights)."""
from __future__ import annotations

import copy

import torch
import torch.distributed as dist
import torch.nn as nn

from tests.distributed.dist_harness import run_ranks

STEPS = 3


class MLP(nn.Module):
    def __init__(self, dim=8, hidden=16):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.w1 = nn.Linear(dim, hidden)
        self.w2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.w2(torch.relu(self.w1(self.norm(x))))


def _batch(step, rank=0, rows=4, dim=8):
    g = torch.Generator().manual_seed(1000 + 10 * step + rank)
    return torch.randn(rows, dim, generator=g)


def _reference(model, batches_per_step, lr=0.1):
    """Single-process training on the whole batch; returns losses and the model."""
    ref = copy.deepcopy(model)
    opt = torch.optim.SGD(ref.parameters(), lr=lr)
    losses = []
    for x in batches_per_step:
        loss = ref(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, ref


def _full(p):
    return (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().cpu()


def _assert_same_weights(model, ref, atol=1e-5):
    ref_params = dict(ref.named_parameters())
    for name, p in model.named_parameters():
        name = name.replace("_fsdp_wrapped_module.", "").replace("module.", "", 1)
        torch.testing.assert_close(_full(p), ref_params[name].detach(), atol=atol, rtol=1e-4,
                                   msg=lambda m, n=name: f"{n}: {m}")


def _dtensor_tp_sp(rank, world):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import (DTensor, Replicate, Shard, distribute_tensor)
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   SequenceParallel, parallelize_module)

    dev = torch.device("neuron", rank)
    mesh = init_device_mesh("neuron", (world,), mesh_dim_names=("tp",))
    assert mesh.device_type == "neuron" and mesh.get_group().name() == "neuron"
    # distribute_tensor / full_tensor / redistribute / from_local
    full = torch.arange(24.0).reshape(6, 4)
    d = distribute_tensor(full.to(dev), mesh, [Shard(0)])
    assert d.to_local().device == dev
    assert torch.equal(d.to_local().cpu(), full.chunk(world)[rank])
    assert torch.equal(d.full_tensor().cpu(), full)
    r = d.redistribute(mesh, [Replicate()])
    assert torch.equal(r.to_local().cpu(), full)
    s1 = r.redistribute(mesh, [Shard(1)])
    assert torch.equal(s1.to_local().cpu(), full.chunk(world, dim=1)[rank])
    f = DTensor.from_local(torch.full((2, 3), float(rank), device=dev), mesh, [Shard(0)])
    assert torch.equal(f.full_tensor().cpu(), torch.cat([torch.full((2, 3), float(i)) for i in range(world)]))
    assert torch.equal((d @ d.T.redistribute(mesh, [Replicate()])).full_tensor().cpu(), full @ full.T)
    # random ops through the DTensor RNG tracker: shards differ, replicas agree
    torch.manual_seed(7)
    u = distribute_tensor(torch.empty(8, 4, device=dev), mesh, [Shard(0)]).uniform_()
    rep = distribute_tensor(torch.empty(8, 4, device=dev), mesh, [Replicate()]).normal_()
    whole = u.full_tensor().cpu()
    assert not torch.equal(whole[:4], whole[4:])
    gathered = [torch.empty(8, 4, device=dev) for _ in range(world)]
    dist.all_gather(gathered, rep.to_local())
    assert torch.equal(gathered[0].cpu(), gathered[1].cpu())
    # tensor parallel: Colwise + Rowwise against the dense reference
    torch.manual_seed(0)
    base = MLP()
    batches = [_batch(s) for s in range(STEPS)]
    ref_losses, ref = _reference(base, batches)
    tp = parallelize_module(copy.deepcopy(base).to(dev), mesh,
                            {"w1": ColwiseParallel(), "w2": RowwiseParallel()})
    opt = torch.optim.SGD(tp.parameters(), lr=0.1, foreach=False)  # plain + DTensor params
    for step, x in enumerate(batches):
        loss = tp(x.to(dev)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        assert abs(loss.item() - ref_losses[step]) < 1e-5, ("tp loss", step)
    _assert_same_weights(tp, ref)
    # sequence parallel: LayerNorm on sequence shards, then Colwise/Rowwise
    seq = [torch.randn(2, 4, 8, generator=torch.Generator().manual_seed(s)) for s in range(STEPS)]
    ref_losses, ref = _reference(base, seq)
    sp = parallelize_module(copy.deepcopy(base).to(dev), mesh, {
        "norm": SequenceParallel(),
        "w1": ColwiseParallel(input_layouts=Replicate()),
        "w2": RowwiseParallel(output_layouts=Shard(1)),
    })
    opt = torch.optim.SGD(sp.parameters(), lr=0.1, foreach=False)
    for step, x in enumerate(seq):
        local = x.chunk(world, dim=1)[rank].to(dev)
        out = sp(local)
        out = out.full_tensor() if isinstance(out, DTensor) else DTensor.from_local(
            out, mesh, [Shard(1)]).full_tensor()
        loss = out.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        assert abs(loss.item() - ref_losses[step]) < 1e-5, ("sp loss", step)
    _assert_same_weights(sp, ref)


def test_device_mesh_dtensor_tensor_and_sequence_parallel():
    run_ranks(_dtensor_tp_sp, 2)


def _fsdp2_ddp(rank, world):
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.nn.parallel import DistributedDataParallel as DDP

    dev = torch.device("neuron", rank)
    torch.manual_seed(0)
    base = MLP()
    local = [_batch(s, rank) for s in range(STEPS)]
    whole = [torch.cat([_batch(s, r) for r in range(world)]) for s in range(STEPS)]
    ref_losses, ref = _reference(base, whole)

    def train(model):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        for x in local:
            loss = model(x.to(dev)).float().pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            part = loss.detach().clone()
            dist.all_reduce(part, op=dist.ReduceOp.AVG)
            losses.append(part.item())
        return losses

    for reshard in (True, False):
        model = copy.deepcopy(base).to(dev)
        for layer in (model.w1, model.w2):
            fully_shard(layer, reshard_after_forward=reshard)
        fully_shard(model, reshard_after_forward=reshard)
        assert next(model.parameters()).to_local().device == dev
        losses = train(model)
        assert max(abs(a - b) for a, b in zip(losses, ref_losses)) < 1e-5, ("fsdp2", reshard, losses)
        _assert_same_weights(model, ref)
    # bf16 parameters, fp32 gradient reduction
    model = copy.deepcopy(base).to(dev)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in (model.w1, model.w2):
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    losses = train(model)
    assert max(abs(a - b) for a, b in zip(losses, ref_losses)) < 5e-2, ("fsdp2 bf16", losses)
    _assert_same_weights(model, ref, atol=2e-2)
    # DDP
    ddp = DDP(copy.deepcopy(base).to(dev))
    losses = train(ddp)
    assert max(abs(a - b) for a, b in zip(losses, ref_losses)) < 1e-5, ("ddp", losses)
    _assert_same_weights(ddp, ref)
    for p in ddp.parameters():
        assert p.grad.device == dev


def test_fsdp2_and_ddp_match_single_process():
    run_ranks(_fsdp2_ddp, 2)


def _two_d_and_checkpoint(rank, world, ckpt_dir):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    dev = torch.device("neuron", rank)
    mesh = init_device_mesh("neuron", (2, 2), mesh_dim_names=("dp", "tp"))
    dp, tp = mesh["dp"], mesh["tp"]
    assert dp.get_group().name() == "neuron" and tp.size() == 2
    torch.manual_seed(0)
    base = MLP()
    dp_rank = dp.get_local_rank()
    local = [_batch(s, dp_rank) for s in range(STEPS)]
    whole = [torch.cat([_batch(s, r) for r in range(2)]) for s in range(STEPS)]
    ref_losses, ref = _reference(base, whole)

    def build():
        m = parallelize_module(copy.deepcopy(base).to(dev), tp,
                               {"w1": ColwiseParallel(), "w2": RowwiseParallel()})
        for layer in (m.w1, m.w2):
            fully_shard(layer, mesh=dp)
        return fully_shard(m, mesh=dp)

    model = build()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, x in enumerate(local):
        loss = model(x.to(dev)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        part = loss.detach().clone()
        dist.all_reduce(part, op=dist.ReduceOp.AVG, group=dp.get_group())
        assert abs(part.item() - ref_losses[step]) < 1e-5, ("2d loss", step)
    _assert_same_weights(model, ref)
    # distributed checkpoint: save the sharded state, load it into a fresh model
    dcp.save(get_model_state_dict(model), checkpoint_id=ckpt_dir)
    fresh = build()
    state = get_model_state_dict(fresh)
    dcp.load(state, checkpoint_id=ckpt_dir)
    set_model_state_dict(fresh, state)
    _assert_same_weights(fresh, ref)
    shard = next(iter(state.values()))
    assert shard.to_local().device == dev


def test_tp_by_fsdp_2d_and_distributed_checkpoint(tmp_path):
    run_ranks(_two_d_and_checkpoint, 4, str(tmp_path / "ckpt"))
