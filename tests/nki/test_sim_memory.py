"""Memory: NaN/4 sentinels, SBUF per-partition capacity per target, PSUM 8 x 2 KiB banks."""
import numpy as np
import pytest

import nki
import nki.isa as nisa
import nki.language as nl

A = np.zeros((2, 2), np.float32)


def test_uninitialised_memory_sentinels():
    def k(a):
        out_f = nl.ndarray((4, 4), nl.float32, buffer=nl.shared_hbm)
        out_i = nl.ndarray((4, 4), nl.int32, buffer=nl.shared_hbm)
        nl.store(out_f, nl.ndarray((4, 4), nl.float32, buffer=nl.sbuf))
        nl.store(out_i, nl.ndarray((4, 4), nl.int32, buffer=nl.sbuf))
        return out_f, out_i
    f, i = nki.simulate(k)(A)
    assert np.isnan(f).all()
    assert (i == 4).all()


def test_partial_store_leaves_nan_visible():
    def k(a):
        out = nl.ndarray((4, 4), nl.float32, buffer=nl.shared_hbm)
        nl.store(out[0:2], nl.full((2, 4), 1.0, nl.float32))
        return out
    out = nki.simulate(k)(A)
    assert (out[:2] == 1).all() and np.isnan(out[2:]).all()


def _fill_sbuf(nbytes_per_partition, chunks):
    def k(a):
        keep = []
        per = nbytes_per_partition // chunks // 4
        for _ in range(chunks):
            keep.append(nl.ndarray((128, per), nl.float32, buffer=nl.sbuf))
        return None
    return k


@pytest.mark.parametrize("target,kib", [("trn1", 192), ("trn2", 224), ("trn3", 256)])
def test_sbuf_capacity_per_target(target, kib, expect_code):
    nki.simulate(_fill_sbuf(kib * 1024, 4), target=target)(A)
    rep = nki.last_run()
    assert rep.sbuf_peak_bytes_per_partition == kib * 1024
    assert rep.sbuf_capacity_bytes_per_partition == kib * 1024
    with pytest.raises(nki.NkiValidationError) as ei:
        nki.simulate(_fill_sbuf(kib * 1024 + 4 * 1024, 4), target=target)(A)
    assert ei.value.code == "err_sbuf_out_of_memory"
    assert str(kib * 1024) in str(ei.value)


def test_sbuf_freed_when_tensors_drop():
    def k(a):
        for _ in range(50):                      # 50 x 64 KiB, but only ~2 live at a time
            t = nl.ndarray((128, 16 * 1024), nl.float32, buffer=nl.sbuf)
            nisa.memset(t, 0.0)
        return None
    nki.simulate(k)(A)
    assert nki.last_run().sbuf_peak_bytes_per_partition == 2 * 64 * 1024


def test_partition_start_rule_packs_small_tiles():
    def k(a):
        ts = [nl.ndarray((32, 56 * 1024 // 4), nl.float32, buffer=nl.sbuf) for _ in range(16)]  # noqa: F841
        return None
    # 16 tiles of 32 partitions x 56 KiB fit in 4 quadrants x 4 = 224 KiB per partition
    nki.simulate(k, target="trn2")(A)
    assert nki.last_run().sbuf_peak_bytes_per_partition == 224 * 1024


def test_env_target_override(monkeypatch, expect_code):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen2")
    expect_code("err_sbuf_out_of_memory", _fill_sbuf(200 * 1024, 4), A)
    assert nl.tile_size.sbuf_fmax_bytes == 192 * 1024


def test_capacity_checks_can_be_disabled(monkeypatch):
    monkeypatch.setenv("NKI_CHECK_CAPACITY", "0")
    nki.simulate(_fill_sbuf(300 * 1024, 4))(A)
    assert nki.last_run().sbuf_peak_bytes_per_partition == 300 * 1024


def _psum_tiles(n, fp32_cols=512):
    def k(a):
        keep = [nl.ndarray((128, fp32_cols), nl.float32, buffer=nl.psum) for _ in range(n)]  # noqa: F841
        return None
    return k


def test_psum_eight_banks(expect_code):
    nki.simulate(_psum_tiles(8))(A)
    assert nki.last_run().psum_peak_banks == 8
    e = expect_code("err_psum_out_of_banks", _psum_tiles(9), A)
    assert "8" in str(e)


def test_psum_small_tiles_still_take_a_bank(expect_code):
    expect_code("err_psum_out_of_banks", _psum_tiles(9, fp32_cols=1), A)


def test_psum_multi_bank_tensor_and_limit(expect_code):
    nki.simulate(_psum_tiles(2, fp32_cols=2048))(A)        # 2 x 4 banks
    assert nki.last_run().psum_peak_banks == 8
    expect_code("err_size_of_dimension_exceed_arch_limit", _psum_tiles(1, fp32_cols=4097), A)


def test_psum_bank7_reserved(monkeypatch, expect_code):
    monkeypatch.setenv("NKI_DMA_TRANSPOSE_AS_PE_TRANSPOSE", "true")
    expect_code("err_psum_out_of_banks", _psum_tiles(8), A)
    assert nl.tile_size.psum_num_banks == 7


def test_on_chip_partition_limit(expect_code):
    def k(a):
        nl.ndarray((256, 4), nl.float32, buffer=nl.sbuf)
    e = expect_code("err_num_partition_exceed_arch_limit", k, A)
    assert "256" in str(e) and "128" in str(e)


def test_tile_size_per_target():
    assert nl.tile_size.pmax == 128
    assert nl.tile_size.gemm_stationary_fmax == 128 and nl.tile_size.gemm_moving_fmax == 512
    assert nl.tile_size.psum_bank_fmax == 512 and nl.tile_size.bn_stats_fmax == 512
    seen = {}

    def k(a):
        seen["v"] = nl.tile_size.sbuf_fmax_bytes
    for t, kib in (("trn1", 192), ("trn2", 224), ("trn3", 256)):
        nki.simulate(k, target=t)(A)
        assert seen["v"] == kib * 1024
    assert nl.tile_size.sbuf_fmax_bytes == 224 * 1024       # default target: trn2
