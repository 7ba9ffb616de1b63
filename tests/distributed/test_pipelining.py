"""Pipeline parallelism (`torch.distributed.pipelining`) on neuron tensors over backend "neuron".

A small transformer (embedding, pre-norm attention + MLP blocks, head) is split into stages by hand
(`PipelineStage`) and by the tracer (`pipeline()`), trained two SGD steps with ScheduleGPipe,
Schedule1F1B and ScheduleInterleaved1F1B, and compared with the same model trained in one process on
CPU: the per-microbatch losses and every parameter after the steps (which the gradients decide) must
agree. PP x DP runs the stages under FSDP2 on a 2-D ("pp", "dp") mesh. One launch per world size
checks all of these; the bad-input cases (a stage count that does not fit the ranks) run in it too,
and each must raise on every rank rather than leave one waiting.
"""
from __future__ import annotations

import copy
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from tests.distributed.dist_harness import run_ranks

VOCAB, DIM, HEADS, SEQ, BATCH, STEPS, LR = 32, 16, 2, 8, 8, 2, 0.1


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.qkv, self.proj = nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 2 * DIM), nn.GELU(), nn.Linear(2 * DIM, DIM))

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, DIM)
        x = x + self.proj(attn)
        return x + self.mlp(self.norm2(x))


class Transformer(nn.Module):
    """Layers in a ModuleDict (as TorchTitan keeps them) so a stage can drop the ones it does not own."""

    def __init__(self, n_layers: int):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleDict({str(i): Block() for i in range(n_layers)})
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, tokens):
        x = self.embed(tokens) if self.embed is not None else tokens
        for layer in self.layers.values():
            x = layer(x)
        return self.head(self.norm(x)) if self.head is not None else x


def loss_fn(logits, target):
    return F.cross_entropy(logits.reshape(-1, VOCAB), target.reshape(-1))


def _model(n_layers: int) -> Transformer:
    torch.manual_seed(0)
    return Transformer(n_layers)


def _data(step: int):
    g = torch.Generator().manual_seed(100 + step)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g)
    return tokens[:, :-1], tokens[:, 1:]


def _reference(n_layers: int, n_microbatches: int):
    """One CPU process: per-step, per-microbatch losses and the trained model. The schedules scale
    gradients by 1 / n_microbatches, i.e. train on the mean of the microbatch losses."""
    model = _model(n_layers)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for step in range(STEPS):
        x, y = _data(step)
        mb = [loss_fn(model(xm), ym) for xm, ym in zip(x.chunk(n_microbatches), y.chunk(n_microbatches))]
        opt.zero_grad()
        (sum(mb) / n_microbatches).backward()
        opt.step()
        losses.append(torch.stack([m.detach() for m in mb]))
    return losses, model


def _stage_module(model: Transformer, stage: int, n_stages: int) -> Transformer:
    """The layers of `stage` (n_layers / n_stages consecutive ones), with the embedding on the first
    stage and the head on the last."""
    part = copy.deepcopy(model)
    per = len(model.layers) // n_stages
    for i in list(part.layers.keys()):
        if not stage * per <= int(i) < (stage + 1) * per:
            del part.layers[i]
    if stage != 0:
        part.embed = None
    if stage != n_stages - 1:
        part.norm, part.head = None, None
    return part


def _train(schedule, stage_modules, n_microbatches, rank_has_first, rank_has_last, dp=(0, 1)):
    """STEPS SGD steps through `schedule`; returns the last stage's per-microbatch losses per step."""
    params = [p for m in stage_modules for p in m.parameters()]
    opt = torch.optim.SGD(params, lr=LR)
    dev = torch.device("neuron", torch.neuron.current_device())
    dp_rank, dp_size = dp
    got = []
    for step in range(STEPS):
        x, y = (t.chunk(dp_size)[dp_rank].to(dev) for t in _data(step))
        opt.zero_grad()
        losses = []
        kwargs = {"target": y, "losses": losses} if rank_has_last else {}
        if rank_has_first:
            schedule.step(x, **kwargs)
        else:
            schedule.step(**kwargs)
        opt.step()
        if rank_has_last:
            assert len(losses) == n_microbatches and all(l.device == dev for l in losses)
            got.append(torch.stack([l.detach().cpu() for l in losses]))
    return got


def _assert_trained_like(stage_modules, ref_model, got_losses, ref_losses, what):
    ref = dict(ref_model.named_parameters())
    for m in stage_modules:
        for name, p in m.named_parameters():
            full = p.full_tensor() if hasattr(p, "full_tensor") else p
            assert full.device.type == "neuron", (what, name, full.device)
            torch.testing.assert_close(full.detach().cpu(), ref[name].detach(), atol=2e-5, rtol=1e-4,
                                       msg=lambda msg, n=name: f"{what}: {n}: {msg}")
    for step, got in enumerate(got_losses):
        torch.testing.assert_close(got, ref_losses[step], atol=1e-5, rtol=1e-5, msg=lambda msg: f"{what} step {step}: {msg}")


def _manual(rank, world, schedule_cls, stages_per_rank, n_microbatches, ref):
    from torch.distributed.pipelining import PipelineStage

    n_stages = world * stages_per_rank
    model = _model(n_stages)
    dev = torch.device("neuron", rank)
    # Interleaved schedules place stage i on rank i % world ("loop" order).
    indices = [rank + k * world for k in range(stages_per_rank)]
    modules = [_stage_module(model, i, n_stages).to(dev) for i in indices]
    stages = [PipelineStage(m, i, n_stages, dev) for m, i in zip(modules, indices)]
    schedule = schedule_cls(stages if stages_per_rank > 1 else stages[0], n_microbatches=n_microbatches,
                            loss_fn=loss_fn)
    got = _train(schedule, modules, n_microbatches, 0 in indices, n_stages - 1 in indices)
    ref_losses, ref_model = ref[(n_stages, n_microbatches)]
    _assert_trained_like(modules, ref_model, got, ref_losses, f"{schedule_cls.__name__} x{n_stages} stages")


def _traced(rank, world, n_microbatches, ref):
    """`pipeline()` splits the whole model at the layer boundaries; each rank builds its stage."""
    from torch.distributed.pipelining import ScheduleGPipe, SplitPoint, pipeline

    model = _model(world)
    x, _ = _data(0)
    split_spec = {f"layers.{i}": SplitPoint.BEGINNING for i in range(1, world)}
    pipe = pipeline(model, mb_args=(x.chunk(n_microbatches)[0],), split_spec=split_spec)
    assert pipe.num_stages == world
    dev = torch.device("neuron", rank)
    stage = pipe.build_stage(rank, dev)
    schedule = ScheduleGPipe(stage, n_microbatches=n_microbatches, loss_fn=loss_fn)
    got = _train(schedule, [stage.submod], n_microbatches, rank == 0, rank == world - 1)
    ref_losses, ref_model = ref[(world, n_microbatches)]
    # The traced submodule keeps the original qualified names of the parameters it owns.
    ref_params = dict(ref_model.named_parameters())
    own = dict(stage.submod.named_parameters())
    assert own, "the traced stage owns no parameters"
    for name, p in own.items():
        assert p.device == dev
        torch.testing.assert_close(p.detach().cpu(), ref_params[name].detach(), atol=2e-5, rtol=1e-4,
                                   msg=lambda msg, n=name: f"pipeline(): {n}: {msg}")
    for step, got_step in enumerate(got):
        torch.testing.assert_close(got_step, ref_losses[step], atol=1e-5, rtol=1e-5)


def _pp_dp(rank, world, n_microbatches, ref):
    """PP x DP: 2 pipeline stages, each data-parallel over 2 ranks with FSDP2 (mesh ("pp", "dp"))."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    mesh = init_device_mesh("neuron", (2, world // 2), mesh_dim_names=("pp", "dp"))
    pp_rank, dp_rank = mesh["pp"].get_local_rank(), mesh["dp"].get_local_rank()
    dev = torch.device("neuron", rank)
    module = _stage_module(_model(2), pp_rank, 2).to(dev)
    fully_shard(module, mesh=mesh["dp"])
    stage = PipelineStage(module, pp_rank, 2, dev, group=mesh["pp"].get_group())
    schedule = Schedule1F1B(stage, n_microbatches=n_microbatches, loss_fn=loss_fn)
    _train(schedule, [module], n_microbatches, pp_rank == 0, pp_rank == 1, dp=(dp_rank, world // 2))
    # Each dp rank trains on half the batch; FSDP averages the halves' gradients, so the step is the
    # full-batch step with n_microbatches * dp microbatches.
    ref_losses, ref_model = ref[(2, n_microbatches * world // 2)]
    # (The losses are of each dp rank's half of the batch, so only the weights are compared.)
    _assert_trained_like([module], ref_model, [], ref_losses, "PP x DP (FSDP2)")


def _bad_stage_counts(rank, world):
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe, ScheduleInterleaved1F1B

    dev = torch.device("neuron", rank)
    model = _model(world)
    # Fewer stages than ranks: refused when the stage is built, on every rank, before any transfer.
    with pytest.raises(RuntimeError, match="cannot be larger than number of stages"):
        PipelineStage(_stage_module(model, 0, 1).to(dev), 0, world - 1, dev)
    # A single-stage schedule given a stage list, and an interleaved one given one stage.
    stage = PipelineStage(_stage_module(model, rank, world).to(dev), rank, world, dev)
    with pytest.raises(Exception):
        ScheduleGPipe([stage], n_microbatches=2, loss_fn=loss_fn)
    with pytest.raises(Exception):
        ScheduleInterleaved1F1B(stage, n_microbatches=2, loss_fn=loss_fn)
    dist.barrier()  # every rank got here: none is left waiting for a transfer


def _single_stage_schedule_with_more_stages(rank, world):
    """Each rank builds one stage of 2 * world with a single-stage schedule: stage 1 (rank 1) then
    expects a transfer that stage 0 never makes in that form. torch does not check the count; the
    neuron group's send/recv check refuses the mismatched transfer at once, naming both ranks, and the
    peers fail as soon as that rank drops out, so every rank raises and none waits out the timeout.
    Run last: it leaves the group unusable."""
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    dev = torch.device("neuron", rank)
    stage = PipelineStage(_stage_module(_model(2 * world), rank, 2 * world).to(dev), rank, 2 * world, dev)
    schedule = ScheduleGPipe(stage, n_microbatches=2, loss_fn=loss_fn)
    x, _ = (t.to(dev) for t in _data(0))
    # torch 2.15's schedules name the mismatch themselves ("Expected _StageBackwardMeta from P2P, ...")
    with pytest.raises(RuntimeError, match="send/recv mismatch|Connection closed|Connection reset|"
                                           "Expected _Stage[A-Za-z]*Meta from P2P"):
        schedule.step(x) if rank == 0 else schedule.step()


def _world(rank, world, ref):
    from torch.distributed.pipelining import Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B

    _bad_stage_counts(rank, world)
    _manual(rank, world, ScheduleGPipe, 1, 4, ref)
    _manual(rank, world, Schedule1F1B, 1, 4, ref)
    _manual(rank, world, ScheduleInterleaved1F1B, 2, 4, ref)
    if world == 2:
        _traced(rank, world, 2, ref)
        _single_stage_schedule_with_more_stages(rank, world)
    else:
        _pp_dp(rank, world, 2, ref)


@pytest.mark.parametrize("world", [2, 4])
def test_pipeline_schedules_match_single_process(world):
    ref = {key: _reference(*key) for key in [(world, 4), (2 * world, 4), (world, 2), (2, 4)]}
    run_ranks(_world, world, ref, pg_timeout=timedelta(seconds=30), deadline_s=120)
