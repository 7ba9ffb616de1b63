"""The numbers, pinned: a large matmul / add / transcendental is exactly its peak (facts) over its
named efficiency, no estimate beats the facts' peaks, an assumption override scales the estimate
proportionally, the ring all-reduce equals its closed form, 1 GiB all-reduce within the facts'
bandwidths, LNC and generation scaling."""
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
def test_large_matmul_is_peak_over_efficiency(lnc):
    hw = hardware("trn2.3xlarge", lnc)
    e = _mm(8192, torch.bfloat16, hw)
    ideal = 2 * 8192 ** 3 / (79e12 * lnc)          # facts C1: 79 TFLOPS bf16 per physical core
    launch = hw.assumptions.eager_launch_s
    assert e.bound == "compute" and e.engine == "tensor"
    assert (e.seconds - launch) / ideal == pytest.approx(1 / hw.assumptions.matmul_efficiency, rel=0.03)
    assert _mm(8192, torch.float32, hw).seconds - launch == pytest.approx(79 / 20 * (e.seconds - launch), rel=0.01)


def test_large_add_is_bandwidth_over_efficiency():
    hw = hardware("trn2.3xlarge", 1)
    e = _add(256 << 20, hw)
    ideal = 3 * (256 << 20) * 4 / (2.9e12 / 8)      # facts C1: 2.9 TB/s per 8-core chip
    assert e.bound == "memory"
    assert (e.seconds - e.launch_s) / ideal == pytest.approx(1 / hw.assumptions.hbm_efficiency, rel=0.03)


def test_vector_bound_op_is_lane_rate_over_efficiency():
    """softmax in bf16 makes three passes (max, exp-sum, scale) over 4 bytes of traffic per element:
    ScalarE (128 lanes x 1.2 GHz per core, facts C1) bounds it before HBM does."""
    hw = hardware("trn2.3xlarge", 1)
    x = torch.empty(4096, 16384, dtype=torch.bfloat16, device="meta")
    e = op_estimate(aten._softmax.default, (x, -1, False), {}, x, hardware=hw)
    ideal = 3 * x.numel() / (128 * 1.2e9)
    assert e.bound == "compute" and e.engine == "scalar"
    assert (e.seconds - e.launch_s) / ideal == pytest.approx(1 / hw.assumptions.vector_efficiency, rel=0.03)


_SHAPES = [(1, 1, 1), (1, 4096, 4096), (128, 128, 128), (512, 4096, 64), (4096, 4096, 4096), (8192, 128, 8192)]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float8_e4m3fn])
@pytest.mark.parametrize("instance, lnc", [("trn1.32xlarge", 1), ("trn2.3xlarge", 1), ("trn2.3xlarge", 2),
                                           ("trn3.3xlarge", 2)])
def test_no_estimate_beats_peak(dtype, instance, lnc):
    """With every efficiency at 1 and no launch cost, an op is never faster than its FLOPs at the
    TensorEngine peak nor its bytes at the HBM peak (the facts' figures, not the model's own)."""
    hw = hardware(instance, lnc, assumptions={"matmul_efficiency": 1, "hbm_efficiency": 1,
                                              "vector_efficiency": 1, "eager_launch_s": 0})
    peak = {"bfloat16": 1, "float32": 0, "float8_e4m3fn": 2}[str(dtype).split(".")[-1]]
    chip = hw.chip
    flops_peak = [chip.tensor_flops["float32"], chip.tensor_flops["bfloat16"],
                  chip.tensor_flops["float8_e4m3fn"]][peak] * lnc
    bw = chip.hbm_bytes_per_s / chip.physical_cores * lnc
    for m, k, n in _SHAPES:
        a = torch.empty(m, k, dtype=dtype, device="meta")
        b = torch.empty(k, n, dtype=dtype, device="meta")
        out = torch.empty(m, n, dtype=dtype, device="meta")
        e = op_estimate(aten.mm.default, (a, b), {}, out, hardware=hw)
        assert e.seconds >= 2 * m * k * n / flops_peak, (m, k, n)
        assert e.seconds >= (a.nbytes + b.nbytes + out.nbytes) / bw, (m, k, n)
        x = torch.empty(m * n, dtype=dtype, device="meta")
        add = op_estimate(aten.add.Tensor, (x, x), {}, x, hardware=hw)
        assert add.seconds >= 3 * x.nbytes / bw


def test_assumption_overrides_scale_the_estimate_proportionally():
    base = hardware("trn2.3xlarge", 1, assumptions={"eager_launch_s": 0})
    half = {name: hardware("trn2.3xlarge", 1, assumptions={"eager_launch_s": 0, name: value})
            for name, value in (("matmul_efficiency", base.assumptions.matmul_efficiency / 2),
                                ("hbm_efficiency", base.assumptions.hbm_efficiency / 2),
                                ("vector_efficiency", base.assumptions.vector_efficiency / 2))}
    mm = _mm(8192, torch.bfloat16, base).seconds
    assert _mm(8192, torch.bfloat16, half["matmul_efficiency"]).seconds == pytest.approx(2 * mm, rel=0.01)
    add = _add(256 << 20, base).seconds
    assert _add(256 << 20, half["hbm_efficiency"]).seconds == pytest.approx(2 * add, rel=0.001)
    x = torch.empty(4096, 16384, dtype=torch.bfloat16, device="meta")
    exp = [op_estimate(aten._softmax.default, (x, -1, False), {}, x, hardware=h).seconds
           for h in (base, half["vector_efficiency"])]
    assert exp[1] == pytest.approx(2 * exp[0], rel=0.001)
    # a launch-bound op is its launch: 3x the launch, 3x the time
    tiny = torch.empty(4, device="meta")
    for launch in (10e-6, 30e-6):
        h = hardware("trn2.3xlarge", 1, assumptions={"eager_launch_s": launch})
        e = op_estimate(aten.add.Tensor, (tiny, tiny), {}, tiny, hardware=h)
        assert e.bound == "launch" and e.seconds == pytest.approx(launch, rel=0.001)
    # collective bandwidth efficiency: the transfer part scales as 1 / efficiency
    hw = hardware("trn2.48xlarge", 2)
    slow = hardware("trn2.48xlarge", 2, assumptions={"neuronlink_efficiency": hw.assumptions.neuronlink_efficiency / 2})
    t1 = collective_estimate("all_reduce", 1 << 30, 8, hardware=hw)
    t2 = collective_estimate("all_reduce", 1 << 30, 8, hardware=slow)
    assert t2.transfer_s == pytest.approx(2 * t1.transfer_s, rel=1e-6) and t2.latency_s == t1.latency_s


_RING_LAYOUTS = [("trn2.48xlarge", 2, "chip"), ("trn2.48xlarge", 8, "neuronlink"), ("trn2.48xlarge", 64, "neuronlink"),
                 ("trn2.48xlarge", 128, "efa"), ("trn1.32xlarge", 32, "neuronlink"), ("trn3.48xlarge", 16, "neuronlink")]


# inside an instance the runtime runs a ring above 56 MB only (smaller sizes: the next test);
# across instances a ring at every size
@pytest.mark.parametrize("instance, n, where, nbytes", [(*layout, 1 << 30) for layout in _RING_LAYOUTS]
                         + [("trn2.48xlarge", 128, "efa", 1 << 20)])
def test_ring_all_reduce_equals_its_closed_form(instance, n, where, nbytes):
    """2(n-1)/n x bytes / bus bandwidth + launch + 2(n-1) step latencies, from the hardware
    facts (neuron_hardware) and the named assumptions, computed here independently."""
    import neuron_hardware

    hw = hardware(instance)
    a = hw.assumptions
    spec = neuron_hardware.INSTANCES[instance]
    cores_per_chip = spec.chip.physical_cores // hw.lnc
    if where == "chip":      # each ring step reads and writes the shared chip HBM
        bw = spec.chip.hbm_bytes_per_s * a.hbm_efficiency / (2 * min(n, cores_per_chip))
        step = a.same_chip_step_latency_s
    elif where == "neuronlink":   # the chip's NeuronLink bandwidth shared by its ranks in the group
        bw = spec.neuronlink_bytes_per_s * a.neuronlink_efficiency / min(n, cores_per_chip)
        step = a.neuronlink_step_latency_s
    else:   # the ring as fast as its slower hops: EFA (one stream per group crossing the instance,
        # here the group fills each instance: one) or NeuronLink inside each instance
        per_instance = cores_per_chip * spec.chips
        streams = per_instance // min(n, per_instance)
        bw = min(spec.efa_bytes_per_s * a.efa_efficiency / streams,
                 spec.neuronlink_bytes_per_s * a.neuronlink_efficiency / min(n, cores_per_chip))
        step = a.efa_step_latency_s
    closed = 2 * (n - 1) / n * nbytes / bw + a.reduction_launch_s + 2 * (n - 1) * step
    c = collective_estimate("all_reduce", nbytes, n, hardware=hw)
    assert c.placement == where
    assert c.seconds == pytest.approx(closed, rel=0.02)


@pytest.mark.parametrize("instance, n, chips", [("trn2.48xlarge", 64, 16), ("trn1.32xlarge", 32, 16),
                                                ("trn1.32xlarge", 8, 4), ("trn2.48xlarge", 8, 2)])
@pytest.mark.parametrize("kind, nbytes, phases, algorithm", [
    ("all_gather", 1 << 10, 1, "mesh"), ("reduce_scatter", 512 << 10, 1, "mesh"),
    ("all_reduce", 16 << 10, 2, "mesh"), ("all_gather", 4 << 20, 1, "recursive"),
    ("all_reduce", 32 << 20, 2, "recursive")])
def test_small_collectives_inside_an_instance_take_the_runtimes_algorithm(instance, n, chips, kind, nbytes,
                                                                          phases, algorithm):
    """Below 1 MB Mesh (2 steps per reduce-scatter or all-gather phase), from 1 to 56 MB recursive
    doubling-halving (1 intra-chip step + log2(chips) steps per phase), the ring's bytes, as the
    Neuron runtime's intra-node collectives page describes (docs/hardware-sources.md C5)."""
    import math

    import neuron_hardware

    hw = hardware(instance)
    a = hw.assumptions
    spec = neuron_hardware.INSTANCES[instance]
    per_chip = min(n, spec.chip.physical_cores // hw.lnc)
    assert n // per_chip == chips
    bw = spec.neuronlink_bytes_per_s * a.neuronlink_efficiency / per_chip
    ring_bytes = (2 if kind == "all_reduce" else 1) * (n - 1) / n * nbytes
    steps = phases * (2 if algorithm == "mesh" else 1 + math.log2(chips))
    start = a.collective_launch_s if kind == "all_gather" else a.reduction_launch_s
    closed = ring_bytes / bw + start + steps * a.neuronlink_step_latency_s
    c = collective_estimate(kind, nbytes, n, hardware=hw)
    assert c.placement == "neuronlink" and c.algorithm.startswith(algorithm)
    assert c.seconds == pytest.approx(closed, rel=0.02)


def test_small_all_gather_latency_matches_nccom_test():
    """nccom-test's 1 KiB fp32 all-gather takes 10.0 us on 8 ranks and 6.2 us on 32
    (docs/hardware-sources.md C3): flat in the group size, as Mesh is, within 1.5x of each; a ring
    of 31 steps would take 7x longer."""
    hw = hardware("trn1.32xlarge")
    for n, measured in ((8, 10.0e-6), (32, 6.2e-6)):
        c = collective_estimate("all_gather", 1024, n, hardware=hw)
        assert measured / 1.5 <= c.seconds <= measured * 1.5, (n, c.seconds)
    ring = hw.assumptions.collective_launch_s + 31 * hw.assumptions.neuronlink_step_latency_s
    assert ring > 7 * 6.2e-6


def test_small_all_reduce_latency_matches_nccom_test():
    """nccom-test's 2-rank fp32 all-reduce takes 58 us at 1 KiB and 68 us at 1 MiB
    (docs/hardware-sources.md C3), ten times a 1 KiB all-gather: within 1.25x of each, on two
    cores of one chip and on two chips."""
    hw = hardware("trn1.32xlarge")
    for nbytes, measured in ((1024, 58e-6), (1 << 20, 68e-6)):
        for ranks in ((0, 1), (0, 2)):
            c = collective_estimate("all_reduce", nbytes, 2, hardware=hw, ranks=ranks)
            assert measured / 1.25 <= c.seconds <= measured * 1.25, (nbytes, ranks, c.placement, c.seconds)


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
    assert efa > link     # the same bus bandwidth (NeuronLink bounds both rings), twice the steps
    ag = collective_estimate("all_gather", 1 << 30, 8, hardware=hw).seconds
    assert ag == pytest.approx(collective_estimate("all_reduce", 1 << 30, 8, hardware=hw).seconds / 2, rel=0.05)
    trn3 = collective_estimate("all_reduce", 1 << 30, 8, hardware=hardware("trn3.48xlarge", 2)).seconds
    assert trn3 < collective_estimate("all_reduce", 1 << 30, 8, hardware=hw).seconds
    with pytest.raises(ValueError, match="kind 'allreduce' is not modelled; use one of: all_reduce"):
        collective_estimate("allreduce", 1, 2, hardware=hw)


# nccom-test's multi-instance example: a 64-rank all-reduce on two instances of 32 NeuronCores
# (trn1.32xlarge), fp32, P50 time in us (docs/hardware-sources.md C3)
NCCOM_TWO_INSTANCES = {1 << 20: 1328, 16 << 20: 2138, 256 << 20: 11954, 1 << 30: 41806}


@pytest.mark.parametrize("nbytes, published_us", NCCOM_TWO_INSTANCES.items())
def test_all_reduce_across_two_instances_against_nccom_test(nbytes, published_us):
    """Across instances only the hops that leave an instance cross EFA: a group that fills both
    instances sends one ring's stream over each instance's EFA, not one per rank. Within 1.5x of
    nccom-test from 1 MiB to 1 GiB (its busbw at 1 GiB, 47 GB/s, is below the 80 GB/s of EFA at
    the assumed efficiency; the ring's start-up at 1 MiB is 126 step latencies)."""
    hw = hardware("trn1.32xlarge", 1)
    c = collective_estimate("all_reduce", nbytes, 64, ranks=tuple(range(64)), hardware=hw)
    assert c.placement == "efa"
    assert 1 / 1.5 <= c.seconds / (published_us * 1e-6) <= 1.5
    assert c.bus_bytes_per_s <= hw.instance.efa_bytes_per_s   # never beyond the instance's EFA


def test_efa_is_shared_by_the_groups_that_cross_it():
    """TP 8 x DP 64 on 16 trn1.32xlarge: the DP group of rank 0 (ranks 0, 8, 16, ...) has 4 ranks on
    each instance, so 8 such groups (one per TP rank) cross every instance's EFA at once; a DP
    group with one rank per instance (stride 32) shares it with 32 groups."""
    hw = hardware("trn1.32xlarge", 1)
    a = hw.assumptions
    efa = hw.instance.efa_bytes_per_s * a.efa_efficiency
    stride8 = collective_estimate("all_reduce", 1 << 30, 64, ranks=tuple(range(0, 512, 8)), hardware=hw)
    stride32 = collective_estimate("all_reduce", 1 << 30, 32, ranks=tuple(range(0, 1024, 32)), hardware=hw)
    assert stride8.bus_bytes_per_s == pytest.approx(efa / 8)
    assert stride32.bus_bytes_per_s == pytest.approx(efa / 32)
