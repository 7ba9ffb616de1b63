"""Eager as TorchNeuron runs it: launches overlap queued device work until a host sync
(asynchronous execution), and consecutive elementwise ops fuse (Adaptive Eager Execution), both
named, overridable assumptions that never change results."""
import pytest
import torch

import torch_neuronx

N = 1 << 22          # 16 MiB fp32 per tensor: each op's device time is well above a launch
LAUNCH = 10e-6


def _chain(x):
    return ((x * 2) + 1).exp()


def _est(fn, *args, **assumptions):
    with torch_neuronx.estimate("trn2.3xlarge", assumptions={"eager_launch_s": LAUNCH, **assumptions}) as est:
        out = fn(*args)
    return est, out


def _bodies(est):
    return sum(e.seconds - e.launch_s for e in est.events)


def test_launches_hide_behind_queued_work_until_a_sync():
    x = torch.randn(N, device="neuron")
    ref = _chain(x).cpu()
    sync, out = _est(lambda t: _chain(t).cpu(), x, eager_fusion=0, eager_async=0)
    assert torch.equal(out, ref)
    serial_launch = sum(e.launch_s for e in sync.events)
    assert serial_launch == pytest.approx(len(sync.events) * LAUNCH)
    est, out = _est(lambda t: _chain(t).cpu(), x, eager_fusion=0)
    assert torch.equal(out, ref)            # estimating changes nothing
    # only the first launch is exposed: every later one overlaps the op ahead of it
    assert est.by_category()["launch"] == pytest.approx(LAUNCH)
    assert est.total_s == pytest.approx(_bodies(est) + LAUNCH)
    assert sync.total_s - est.total_s == pytest.approx((len(sync.events) - 1) * LAUNCH)

    # a value read drains the queue: the launch after it is exposed again
    def with_item(t):
        y = t * 2
        y[0].item()
        return (y + 1).exp()
    est2, _ = _est(with_item, x, eager_fusion=0)
    assert est2.by_category()["launch"] == pytest.approx(2 * LAUNCH)


def test_tiny_ops_are_launch_bound_even_when_asynchronous():
    """When every op is shorter than a launch, the device waits for the host: time = launches."""
    x = torch.randn(16, device="neuron")
    est, _ = _est(_chain, x, eager_fusion=0)
    assert est.total_s == pytest.approx(len(est.events) * LAUNCH, rel=0.01)


def test_elementwise_runs_fuse_and_skip_intermediate_traffic():
    x = torch.randn(N, device="neuron")
    unfused, ref = _est(_chain, x, eager_fusion=0)
    fused, out = _est(_chain, x)
    assert torch.equal(out.cpu(), ref.cpu())
    assert sum(e.bytes for e in unfused.events) == 3 * 2 * 4 * N      # three ops, each reads and writes
    assert sum(e.bytes for e in fused.events) == 2 * 4 * N            # read x, write the result
    assert [e.launch_s for e in fused.events][1:] == [0.0, 0.0]       # one launch for the run
    assert fused.total_s < unfused.total_s
    # deterministic mode disables Adaptive Eager fusion, as in TorchNeuron
    torch.use_deterministic_algorithms(True)
    try:
        det, _ = _est(_chain, x)
    finally:
        torch.use_deterministic_algorithms(False)
    assert sum(e.bytes for e in det.events) == 3 * 2 * 4 * N


def test_a_matmul_or_print_breaks_the_run():
    x = torch.randn(512, 512, device="neuron")

    def fn(t):
        y = (t * 2) @ t
        return y + 1
    est, _ = _est(fn, x)
    elementwise = [e for e in est.events if e.category == "elementwise"]
    # nothing saved across the mm: each of the two ops reads its input and writes its result
    assert [e.bytes for e in elementwise] == [2 * 4 * 512 * 512] * 2


def test_switches_are_validated():
    from torch_neuronx.runtime.env import NeuronEnvironmentError

    with pytest.raises(NeuronEnvironmentError, match="eager_fusion=0.5.*switch: use 1 \\(on\\) or 0 \\(off\\)"):
        torch_neuronx.estimate(assumptions={"eager_fusion": 0.5})
