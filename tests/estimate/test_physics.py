"""Sanity against physics: large matmul / add near FLOPs/peak and bytes/bandwidth (within the
named efficiencies), 1 GiB all-reduce within the facts' bandwidths, LNC and generation scaling."""
import pytest
import torch

from torch_neuronx.estimate import hardware, op_estimate
from torch_neuronx.estimate.collectives import collective_estimate

aten = torch.ops.aten


def _mm(n, dtype, hw):
    a = torch.empty(n, n, dtype=dtype, device="meta")
    return op_estimate(aten.mm.default, (a, a), {}, a @ a, hardware=hw)


def _add(numel, hw):
    a = torch.empty(numel, device="meta")
    return op_estimate(aten.add.Tensor, (a, a), {}, a + a, hardware=hw)


@pytest.mark.parametrize("lnc", [1, 2])
def test_large_bf16_matmul_near_peak(lnc):
    hw = hardware("trn2.3xlarge", lnc)
    e = _mm(8192, torch.bfloat16, hw)
    ideal = 2 * 8192 ** 3 / (79e12 * lnc)          # facts C1: 79 TFLOPS bf16 per physical core
    assert 0.9 <= e.seconds / ideal <= 1.3 and e.bound == "compute" and e.engine == "tensor"
    assert _mm(8192, torch.float32, hw).seconds == pytest.approx(79 / 20 * e.seconds, rel=0.01)


def test_large_add_near_hbm_bandwidth():
    hw = hardware("trn2.3xlarge", 1)
    e = _add(256 << 20, hw)
    ideal = 3 * (256 << 20) * 4 / (2.9e12 / 8)      # facts C1: 2.9 TB/s per 8-core chip
    assert 0.9 <= e.seconds / ideal <= 1.3 and e.bound == "memory"


def test_lnc_and_generation_scaling():
    t1 = _mm(8192, torch.bfloat16, hardware("trn2.3xlarge", 1)).seconds
    t2 = _mm(8192, torch.bfloat16, hardware("trn2.3xlarge", 2)).seconds
    assert t2 == pytest.approx(t1 / 2, rel=0.01)
    add2 = _add(256 << 20, hardware("trn2.3xlarge", 2)).seconds
    add3 = _add(256 << 20, hardware("trn3.3xlarge", 2)).seconds
    assert add3 == pytest.approx(add2 * 2.9 / 4.9, rel=0.01)   # HBM 2.9 vs 4.9 TB/s per chip
    fp8_2 = _mm(8192, torch.float8_e4m3fn, hardware("trn2.3xlarge", 1)).seconds
    fp8_3 = _mm(8192, torch.float8_e4m3fn, hardware("trn3.3xlarge", 1)).seconds
    assert fp8_3 == pytest.approx(fp8_2 * 158 / 315, rel=0.02)
    trn1 = _mm(8192, torch.bfloat16, hardware("trn1.32xlarge", 1)).seconds
    assert trn1 == pytest.approx(t1 * 79 / 92, rel=0.01)


@pytest.mark.parametrize("ranks", [2, 8])
def test_one_gib_all_reduce_within_facts_bandwidth(ranks):
    hw = hardware("trn2.48xlarge", 2)
    c = collective_estimate("all_reduce", 1 << 30, ranks, hardware=hw)
    busbw = 2 * (ranks - 1) / ranks * (1 << 30) / c.seconds
    if ranks == 2:
        assert c.placement == "chip"      # logical cores 0 and 1 share chip 0
        assert busbw <= 2.9e12 / 2        # each step reads and writes the chip's HBM (2.9 TB/s)
    else:
        assert c.placement == "neuronlink"
        assert busbw <= 1024e9            # facts C2: NeuronLink-v3 1,024 GB/s per chip
    assert busbw >= 52.8e9                # no slower than nccom-test's 2-rank 1 GiB figure (facts C3)
    assert c.seconds > collective_estimate("all_reduce", 1 << 20, ranks, hardware=hw).seconds


def test_collective_placement_and_scaling():
    hw = hardware("trn2.48xlarge", 2)
    assert collective_estimate("all_gather", 1 << 30, 128, hardware=hw).placement == "efa"
    efa = collective_estimate("all_reduce", 1 << 30, 128, hardware=hw).seconds
    link = collective_estimate("all_reduce", 1 << 30, 64, hardware=hw).seconds
    assert efa > 5 * link
    ag = collective_estimate("all_gather", 1 << 30, 8, hardware=hw).seconds
    assert ag == pytest.approx(collective_estimate("all_reduce", 1 << 30, 8, hardware=hw).seconds / 2, rel=0.05)
    trn3 = collective_estimate("all_reduce", 1 << 30, 8, hardware=hardware("trn3.48xlarge", 2)).seconds
    assert trn3 < collective_estimate("all_reduce", 1 << 30, 8, hardware=hw).seconds
    with pytest.raises(ValueError, match="kind 'allreduce' is not modelled; use one of: all_reduce"):
        collective_estimate("allreduce", 1, 2, hardware=hw)
