"""CPU fallbacks in the estimate: an op TorchNeuron runs on the host CPU (docs/op-support.md) costs
its device-to-host and host-to-device copies over the host link, host time and a host sync,
not device time; a fallback-heavy script is estimated slower than the same computation on ops
that stay on the device, by exactly those charges."""
import pytest
import torch

import neuron_hardware
import torch_neuronx
from torch_neuronx import ops_support
from torch_neuronx.estimate import _fallbacks as fallbacks

B, D, STEPS = 64, 4096, 8
MID = (D - 1) // 2        # torch.median's element: the lower of the two middle ones


def with_fallbacks(x):
    # median: no Core ATen lowering and no PyTorch decomposition -> CPU_FALLBACK (assumed default)
    for _ in range(STEPS):
        x = x - torch.median(x, dim=-1, keepdim=True).values
    return x


def without_fallbacks(x):
    # the same computation on ops that stay on the device: sort (Core ATen) and a slice (a view)
    for _ in range(STEPS):
        x = x - x.sort(dim=-1).values[:, MID:MID + 1]
    return x


def closed_form_charge(a, d2h: int, h2d: int) -> float:
    """host sync + copies each way at the host-link rate + the CPU op (fixed + bytes at host memory rate)."""
    return (a.host_sync_s + (d2h + h2d) / a.host_link_bytes_per_s
            + a.cpu_fallback_op_s + (d2h + h2d) / a.host_memory_bytes_per_s)


def test_the_ops_are_classified_as_the_test_needs():
    assert ops_support.status("aten::median.dim", ("float32", "int64")) == ops_support.CPU_FALLBACK
    for op in ("aten::sort.default", "aten::sub.Tensor"):
        assert ops_support.status(op, ("float32", "int64")) == ops_support.Y, op


def test_fallback_heavy_script_is_slower_by_the_charged_copies():
    x = torch.randn(B, D, device="neuron")
    with torch_neuronx.estimate() as fb_default, torch.no_grad():
        with_fallbacks(x)
    with torch_neuronx.estimate() as clean_default, torch.no_grad():
        without_fallbacks(x)
    assert fb_default.total_s > clean_default.total_s   # with TorchNeuron's async, fused eager too
    # The closed form below isolates the fallback charge: with launches serial and unfused, every op
    # other than the fallback costs the same in both scripts (with async enqueue, the launch after a
    # fallback's sync is exposed as well, which makes the fallback script slower still).
    serial = {"eager_async": 0, "eager_fusion": 0}
    with torch_neuronx.estimate(assumptions=serial) as fb:
        y_fb = with_fallbacks(x)
    with torch_neuronx.estimate(assumptions=serial) as clean:
        y_clean = without_fallbacks(x)
    # the estimate observes: both paths compute what the CPU computes
    ref = with_fallbacks(x.cpu())
    torch.testing.assert_close(y_fb.cpu(), ref, rtol=0, atol=0)
    torch.testing.assert_close(y_clean.cpu(), ref, rtol=0, atol=0)

    assert fb.total_s > clean.total_s
    a = fb.hardware.assumptions
    d2h, h2d = B * D * 4, B * (4 + 8)   # float32 input to the host; the medians (float32) and indices (int64) back
    charge = closed_form_charge(a, d2h, h2d)
    median_events = [e for e in fb.events if e.name.startswith("aten.median")]
    assert len(median_events) == STEPS
    for e in median_events:
        assert e.category == "cpu_fallback" and e.bound == "host" and e.bytes == d2h + h2d
        assert e.seconds == pytest.approx(charge, rel=1e-9)
    # the delta: the fallback charges, less the device time of the ops they replace
    replaced = sum(e.seconds for e in clean.events if e.name.startswith("aten.sort"))
    shared = {"aten.sub.Tensor", "aten.sub"}
    assert sum(e.seconds for e in fb.events if e.name in shared) == pytest.approx(
        sum(e.seconds for e in clean.events if e.name in shared), rel=1e-12)
    assert {e.name for e in fb.events} - {e.name for e in median_events} == {e.name for e in clean.events} - {
        e.name for e in clean.events if e.name.startswith("aten.sort")}
    assert fb.total_s - clean.total_s == pytest.approx(STEPS * charge - replaced, rel=1e-9)
    assert fb.by_category()["cpu_fallback"] == pytest.approx(STEPS * charge, rel=1e-9)


def test_host_link_is_pcie_from_neuron_hardware_and_overridable():
    a = torch_neuronx.estimate.hardware().assumptions
    assert a.host_link_bytes_per_s == neuron_hardware.pcie_bytes_per_s(5, 16) == pytest.approx(16 * 32e9 * 128 / 130 / 8)
    x = torch.randn(B, D, device="neuron")
    slow_link = {"host_link_bytes_per_s": a.host_link_bytes_per_s / 4}
    with torch_neuronx.estimate() as fast:
        torch.median(x, dim=-1)
    with torch_neuronx.estimate(assumptions=slow_link) as slow:
        torch.median(x, dim=-1)
    link_s = (B * D * 4 + B * 12) / a.host_link_bytes_per_s
    assert slow.total_s - fast.total_s == pytest.approx(3 * link_s, rel=1e-9)
    with pytest.raises(Exception, match="host_link_bytes_per_s.*bandwidth"):
        torch_neuronx.estimate(assumptions={"host_link_bytes_per_s": 0})


def test_in_place_fallback_copies_both_ways_and_views_are_free():
    x = torch.rand(1024, device="neuron") + 0.5
    with torch_neuronx.estimate() as est:
        x.polygamma_(1)                               # polygamma: no lowering, no decomposition -> CPU_FALLBACK
        x.unfold(0, 4, 4)                             # a view: metadata only, never charged
    (e,) = [e for e in est.events if e.name.startswith("aten.polygamma_")]
    assert e.bytes == 2 * 1024 * 4                    # in to the host, the same tensor back
    assert e.seconds == pytest.approx(closed_form_charge(est.hardware.assumptions, 4096, 4096), rel=1e-9)
    assert not [e for e in est.events if "unfold" in e.name]


def test_dtype_rows_apply_complex_ops_fall_back():
    z = torch.zeros(256, dtype=torch.complex64, device="neuron")
    with torch_neuronx.estimate() as est:
        z.add_(1)                                     # add: Core ATen, but complex has no device type
    (e,) = est.events
    assert e.category == "cpu_fallback" and e.bytes == 2 * 256 * 8
    r = torch.zeros(256, device="neuron")
    with torch_neuronx.estimate() as est_real:
        r.add_(1)
    assert est_real.events[0].category != "cpu_fallback"


def test_link_bytes_count_neuron_tensors_only():
    x = torch.randn(10, device="neuron")
    d2h, h2d = fallbacks.link_bytes((x, torch.tensor(2.0)), {}, x)
    assert (d2h, h2d) == (40, 40)
