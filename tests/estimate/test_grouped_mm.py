"""The cost of `torch._grouped_mm` (MoE expert matmuls): 2 x sum over groups of m_g x k x n FLOPs
and the operands' bytes, by hand, in every operand layout; seen by estimate() (forward and
backward) and by the profiler's estimated device track."""
import pytest
import torch
from torch.profiler import ProfilerActivity, profile

import torch_neuronx
from torch_neuronx.estimate import hardware, op_estimate

aten = torch.ops.aten
# Sizes and group ends are multiples of 16 bytes, as torch's kernel requires.
M, K, N = 12, 16, 8            # 12 tokens, hidden 16, expert width 8
GROUPS = [4, 4, 0, 4]          # tokens per expert (one idle): all 12 rows routed
PARTIAL = [4, 4]               # two experts take 8 of the 12 rows


def _offs(groups, device="neuron"):
    return torch.tensor(groups, dtype=torch.int32).cumsum(0, dtype=torch.int32).to(device)


def _estimate(a, b, offs, out=None):
    out = torch._grouped_mm(a, b, offs=offs) if out is None else out
    return op_estimate(aten._grouped_mm.default, (a, b), {"offs": offs}, out, hardware=hardware())


def test_moe_forward_flops_and_bytes_by_hand():
    a = torch.randn(M, K, device="neuron")
    b = torch.randn(len(GROUPS), K, N, device="neuron")
    e = _estimate(a, b, _offs(GROUPS))
    assert e.category == "matmul" and e.engine == "tensor" and e.modelled
    assert e.flops == 2 * (4 * K * N + 4 * K * N + 0 + 4 * K * N) == 3072
    # a, b, offs and the output, fp32 and int32: 768 + 2048 + 16 + 384
    assert e.bytes == 4 * (M * K + len(GROUPS) * K * N + len(GROUPS) + M * N) == 3216
    # rows past the last group end are not computed: two experts taking 8 rows cost 8 rows
    partial = _estimate(a, torch.randn(2, K, N, device="neuron"), _offs(PARTIAL))
    assert partial.flops == 2 * 8 * K * N == 2048


def test_shapes_only_count_every_row():
    """Meta offsets (the dry-run planner, compiled graphs) have no values: all M rows count."""
    a = torch.empty(M, K, device="meta", dtype=torch.bfloat16)
    b = torch.empty(2, K, N, device="meta", dtype=torch.bfloat16)
    offs = torch.empty(2, dtype=torch.int32, device="meta")
    assert _estimate(a, b, offs).flops == 2 * M * K * N


@pytest.mark.parametrize("layout, expected", [
    ("3d_3d", 2 * 3 * 4 * K * N),       # batched: 3 groups of [4, K] x [K, N]
    ("2d_2d", 2 * 4 * 20 * N),          # weight gradient: groups cover 20 of K = 24
    ("3d_2d", 2 * 4 * K * 20),          # groups cover 20 of mat2's 24 columns
])
def test_other_layouts_by_hand(layout, expected):
    ends = torch.tensor([8, 16, 20], dtype=torch.int32)
    a, b, offs = {
        "3d_3d": (torch.randn(3, 4, K), torch.randn(3, K, N), None),
        "2d_2d": (torch.randn(4, 24), torch.randn(24, N), ends),
        "3d_2d": (torch.randn(3, 4, K), torch.randn(K, 24), ends),
    }[layout]
    offs = None if offs is None else offs.to("neuron")
    assert _estimate(a.to("neuron"), b.to("neuron"), offs).flops == expected


def test_estimate_report_counts_forward_and_backward():
    torch.manual_seed(0)
    a = torch.randn(M, K, device="neuron", requires_grad=True)
    b = torch.randn(len(GROUPS), K, N, device="neuron", requires_grad=True)
    offs = _offs(GROUPS)
    ref = torch._grouped_mm(a, b, offs=offs).detach().cpu()
    with torch_neuronx.estimate() as est:
        out = torch._grouped_mm(a, b, offs=offs)
        out.square().sum().backward()
    assert torch.equal(out.detach().cpu(), ref)   # estimating changes nothing
    # forward, grad_a (grad [M, N] x b^T per group) and grad_b (a^T x grad, offsets over the
    # shared M: 2-D x 2-D) each cost 2 x M x K x N
    assert est.by_op()["aten._grouped_mm"]["flops"] == 3 * 2 * M * K * N
    assert "aten._grouped_mm" in est.summary(top=20)


def test_profiler_device_track_has_the_grouped_mm_estimate():
    a = torch.randn(M, K, device="neuron")
    b = torch.randn(len(GROUPS), K, N, device="neuron")
    offs = _offs(GROUPS)
    torch._grouped_mm(a, b, offs=offs)    # warm
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        torch._grouped_mm(a, b, offs=offs)
    averages = {e.key: e for e in prof.key_averages()}
    assert averages["aten::_grouped_mm [estimated]"].count == 1
    # the device track sees shapes only (meta copies of the operands)
    meta = [torch.empty(M, K, device="meta"), torch.empty(len(GROUPS), K, N, device="meta"),
            torch.empty(len(GROUPS), dtype=torch.int32, device="meta")]
    expected_us = _estimate(*meta, out=torch.empty(M, N, device="meta")).seconds * 1e6
    got_us = averages["aten::_grouped_mm"].device_time_total
    assert abs(got_us - expected_us) <= 0.01 * expected_us + 0.002   # 1 ns rounding
