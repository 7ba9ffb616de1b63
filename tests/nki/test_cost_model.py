"""Cost model: per-engine timelines, matmul throughput near the published peak, fp32 4x,
64-cycle matmul floor, double-buffered DMA overlapping compute, trn2 vs trn3."""
import ml_dtypes
import numpy as np
import pytest

import nki
import nki.isa as nisa
import nki.language as nl
from nki.examples import matmul, tensor_add
from nki.targets import TARGETS

BF16 = ml_dtypes.bfloat16


def test_well_tiled_bf16_matmul_near_peak(rng):
    lhsT = rng.standard_normal((1024, 2048)).astype(BF16)
    rhs = rng.standard_normal((1024, 1024)).astype(BF16)
    out = nki.simulate(matmul.matmul_optimized, target="trn2")(lhsT, rhs)
    ref = lhsT.astype(np.float32).T @ rhs.astype(np.float32)
    np.testing.assert_allclose(out.astype(np.float32), ref, rtol=2e-2, atol=0.5)
    rep = nki.last_run()
    peak = TARGETS["trn2"].pe_peak_tflops_bf16
    assert peak == pytest.approx(78.6, rel=0.01)
    assert 0.7 * peak <= rep.tflops <= peak, rep.summary()
    assert rep.bottleneck() == "tensor"
    assert rep.dma_compute_overlap_ns > 0.5 * rep.engine_busy_ns["dma"]


def test_naive_tiling_is_slower_than_optimized(rng):
    lhsT = rng.standard_normal((512, 512)).astype(BF16)
    rhs = rng.standard_normal((512, 1024)).astype(BF16)
    nki.simulate(matmul.matmul_tiled)(lhsT, rhs)
    naive = nki.last_run().total_ns
    nki.simulate(matmul.matmul_optimized)(lhsT, rhs)
    assert nki.last_run().total_ns < naive / 2


def _one_matmul(dtype, n):
    def k(a):
        s = nl.ndarray((128, 128), dtype, buffer=nl.sbuf)
        m = nl.ndarray((128, n), dtype, buffer=nl.sbuf)
        nisa.memset(s, 0.0)
        nisa.memset(m, 0.0)
        ps = nl.ndarray((128, n), nl.float32, buffer=nl.psum)
        for _ in range(10):
            nisa.nc_matmul(ps, s, m)
    nki.simulate(k)(np.zeros(1, np.float32))
    return nki.last_run().engine_busy_ns["tensor"]


def test_matmul_costs():
    bf = _one_matmul(nl.bfloat16, 512)
    assert bf == pytest.approx(10 * 512 / 2.4, rel=1e-6)          # N cycles at 2.4 GHz
    assert _one_matmul(nl.float32, 512) == pytest.approx(4 * bf)   # fp32 is 4x slower
    assert _one_matmul(nl.bfloat16, 16) == _one_matmul(nl.bfloat16, 64)   # 64-cycle floor


def _stream(double_buffer):
    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        T = a.shape[0] // 128
        buf = nl.ndarray((128, a.shape[1]), a.dtype, buffer=nl.sbuf)
        res = nl.ndarray((128, a.shape[1]), a.dtype, buffer=nl.sbuf)
        for i in range(T):
            if double_buffer:       # a fresh buffer per iteration: the next load runs ahead
                buf = nl.ndarray((128, a.shape[1]), a.dtype, buffer=nl.sbuf)
                res = nl.ndarray((128, a.shape[1]), a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=buf, src=a[i * 128:(i + 1) * 128])
            nisa.activation(dst=res, op=nl.exp, data=buf)
            nisa.dma_copy(dst=out[i * 128:(i + 1) * 128], src=res)
        return out
    return k


def test_double_buffered_dma_overlaps_compute(rng):
    a = rng.standard_normal((1024, 2048), dtype=np.float32)
    single = nki.simulate(_stream(False))(a)
    r1 = nki.last_run()
    double = nki.simulate(_stream(True))(a)
    r2 = nki.last_run()
    np.testing.assert_allclose(single, np.exp(a), rtol=1e-6)
    np.testing.assert_array_equal(single, double)
    assert r2.total_ns < 0.8 * r1.total_ns, (r1.summary(), r2.summary())
    assert r2.dma_compute_overlap_ns > 2 * r1.dma_compute_overlap_ns
    busy = r2.engine_busy_ns["scalar"] + r2.engine_busy_ns["dma"]
    assert r2.total_ns < busy                       # the timelines overlap


def test_trn3_dma_faster_than_trn2(rng):
    a, b = rng.standard_normal((2, 512, 2048), dtype=np.float32)
    nki.simulate(tensor_add.tensor_add_tiled, target="trn2")(a, b)
    t2 = nki.last_run()
    nki.simulate(tensor_add.tensor_add_tiled, target="trn3")(a, b)
    t3 = nki.last_run()
    assert t2.bottleneck() == "dma"
    assert t3.total_ns < t2.total_ns
    assert t3.target == "trn3"


def test_report_shows_where_time_goes(rng):
    a, b = rng.standard_normal((2, 256, 1024), dtype=np.float32)
    nki.simulate(tensor_add.tensor_add_tiled)(a, b)
    rep = nki.last_run()
    assert set(rep.engine_busy_ns) == {"tensor", "vector", "scalar", "gpsimd", "dma"}
    assert rep.engine_instructions["dma"] == 12 and rep.engine_instructions["vector"] == 4
    assert ("vector", "tensor_tensor[add]") in rep.by_instruction
    assert rep.dma_bytes == 3 * 256 * 1024 * 4
    # fp32 tensor_tensor [128, 512]: 100 + 2 * 512 DVE cycles at 0.96 GHz
    assert rep.by_instruction[("vector", "tensor_tensor[add]")][1] == pytest.approx(
        4 * (100 + 1024) / 0.96)
    text = rep.summary()
    assert "where time goes" in text and "trn2" in text and "dma_copy" in text
    assert rep.instructions_per_second > 0


def test_bf16_vector_perf_mode(rng):
    a, b = rng.standard_normal((2, 128, 512), dtype=np.float32)
    nki.simulate(tensor_add.tensor_add_tiled)(a, b)
    f32 = nki.last_run().engine_busy_ns["vector"]
    nki.simulate(tensor_add.tensor_add_tiled)(a.astype(BF16), b.astype(BF16))
    bf = nki.last_run().engine_busy_ns["vector"]
    assert bf == pytest.approx((100 + 512) / 0.96) and f32 == pytest.approx((100 + 1024) / 0.96)
    nki.simulate(tensor_add.tensor_add_tiled, target="trn1")(a.astype(BF16), b.astype(BF16))
    assert nki.last_run().engine_busy_ns["vector"] == pytest.approx((100 + 1024) / 1.12)
