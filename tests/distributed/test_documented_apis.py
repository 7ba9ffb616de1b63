"""docs/distributed.md behaviours without a test elsewhere: monitored_barrier, Work's methods, DDP comm hooks
on neuron tensors, and TORCH_NEURONX_COLLECTIVE_CHECKS=N / 0."""
from __future__ import annotations

import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist

from tests.distributed.dist_harness import run_ranks
from torch_neuronx.distributed import _collective_check


def _work_and_comm_hook(rank, world):
    dev = torch.device("neuron", rank)
    # Work: wait, is_completed, exception (None when it succeeded) and a future of the neuron tensors.
    t = torch.full((4,), float(rank + 1), device=dev)
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    assert work.is_completed() and work.exception() is None
    result = work.get_future().wait()
    assert result[0].device == dev and result[0].cpu().tolist() == [3.0] * 4, result

    # DDP with a comm hook: the hook sees the bucket on the rank's neuron core, and its result (the average)
    # becomes every rank's gradient.
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    base = torch.nn.Linear(6, 3)
    seen = []

    def average_hook(state, bucket):
        buffer = bucket.buffer()
        seen.append(buffer.device)
        return dist.all_reduce(buffer / world, async_op=True).get_future().then(lambda f: f.value()[0])

    model = DDP(torch.nn.Linear(6, 3).to(dev))
    model.module.load_state_dict(base.state_dict())
    model.register_comm_hook(None, average_hook)
    x = torch.randn(5, 6, generator=torch.Generator().manual_seed(rank))
    model(x.to(dev)).sum().backward()
    assert seen and all(d == dev for d in seen), seen
    expected = torch.zeros_like(base.weight)
    for r in range(world):  # the average of every rank's gradient, on CPU
        base.zero_grad()
        base(torch.randn(5, 6, generator=torch.Generator().manual_seed(r))).sum().backward()
        expected += base.weight.grad / world
    torch.testing.assert_close(model.module.weight.grad.cpu(), expected)


def test_work_and_ddp_comm_hook():
    run_ranks(_work_and_comm_hook, 2)


# torch's dist.monitored_barrier names gloo alone; torch_neuronx/distributed/_monitored_barrier.py lets neuron
# groups through to ProcessGroupNeuron.monitored_barrier (gloo's own, over the same ranks).
def _monitored_barrier(rank, world):
    dist.monitored_barrier(timeout=timedelta(seconds=30))
    with pytest.warns(UserWarning, match="timedelta"):  # a float timeout is seconds, as on gloo
        dist.monitored_barrier(timeout=30.0, wait_all_ranks=True)
    gloo = dist.new_group(backend="gloo")  # other backends still reach torch's own function
    dist.monitored_barrier(gloo, timeout=timedelta(seconds=30))
    if rank == 1:
        return  # skips rank 0's next monitored barrier: its process leaves and its connections close
    with pytest.raises(RuntimeError, match=r"Ranks? 1 failed to pass monitoredBarrier in 1000 ms"):
        dist.monitored_barrier(timeout=timedelta(seconds=1), wait_all_ranks=True)


def test_monitored_barrier_passes_and_names_the_rank_that_did_not_arrive():
    run_ranks(_monitored_barrier, 2, pg_timeout=timedelta(seconds=10))


def test_monitored_barrier_without_a_group_keeps_torchs_error():
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        dist.monitored_barrier(timeout=timedelta(seconds=1))


def _checks_first_n(rank, world):
    dev = torch.device("neuron", rank)
    dist.all_reduce(torch.ones(2, device=dev))  # call 1 of 2 checked
    with pytest.raises(RuntimeError, match=r"(?s)mismatch between collectives .*call #2 .*the first 2 collectives"):
        dist.broadcast(torch.ones(2 if rank == 0 else 3, device=dev), src=0)


def test_collective_checks_n_checks_the_first_n_calls(monkeypatch):
    monkeypatch.setenv(_collective_check.ENV, "2")
    run_ranks(_checks_first_n, 2, pg_timeout=timedelta(seconds=20))


@pytest.mark.parametrize("value,checked", [("0", 0), ("2", 2), ("all", 5), ("", 5)])
def test_collective_checks_budget(monkeypatch, value, checked):
    """How many of 5 calls of a 2-rank group are checked: N, 0 (off), every call, the default (64)."""
    monkeypatch.setenv(_collective_check.ENV, value)
    checker = _collective_check.CollectiveChecker(None, 0, 2, _collective_check.checked_calls_from_env())
    assert sum(checker.wants_check() for _ in range(5)) == checked
