"""Dtypes: bf16/fp8 stored with hardware (round-to-nearest-even) rounding via ml_dtypes."""
import ml_dtypes
import numpy as np
import pytest

import nki
import nki.isa as nisa
import nki.language as nl


def _cast_kernel(dtype):
    def k(a):
        out = nl.ndarray(a.shape, dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        c = nl.ndarray(a.shape, dtype, buffer=nl.sbuf)
        nisa.tensor_copy(c, t)                 # engine write casts to dst dtype
        nl.store(out, c)
        return out
    return k


@pytest.mark.parametrize("nl_dtype,ml", [(nl.bfloat16, ml_dtypes.bfloat16),
                                         (nl.float8_e4m3, ml_dtypes.float8_e4m3),
                                         (nl.float8_e5m2, ml_dtypes.float8_e5m2),
                                         (nl.float16, np.float16)])
def test_low_precision_rounding_matches_ml_dtypes(nl_dtype, ml, rng):
    a = (rng.standard_normal((32, 64)) * 4).astype(np.float32)
    out = nki.simulate(_cast_kernel(nl_dtype))(a)
    assert out.dtype == np.dtype(ml)
    np.testing.assert_array_equal(out.astype(np.float32), a.astype(ml).astype(np.float32))


def test_bf16_round_to_nearest_even():
    # 1 + 2^-8 is exactly halfway between two bf16 values -> rounds to even (1.0)
    a = np.array([[1 + 2 ** -8, 1 + 3 * 2 ** -8]], np.float32)
    out = nki.simulate(_cast_kernel(nl.bfloat16))(a).astype(np.float32)
    np.testing.assert_array_equal(out, [[1.0, 1 + 2 ** -6]])


def test_imprecise_mode_stores_fp32(monkeypatch):
    monkeypatch.setenv("NKI_PRECISE_FP", "0")
    a = np.array([[1 + 2 ** -10]], np.float32)
    # the bf16 intermediate is kept in fp32, so no bf16 rounding happens on the way
    seen = {}

    def k(a):
        c = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_copy(c, nl.load(a))
        seen["v"] = np.asarray(c)
    nki.simulate(k)(a)
    assert seen["v"].dtype == np.float32 and seen["v"][0, 0] == np.float32(1 + 2 ** -10)


def test_tf32_rounds_mantissa():
    a = np.array([[1 + 2 ** -12]], np.float32)
    out = nki.simulate(_cast_kernel(nl.tfloat32))(a)
    assert out[0, 0] == 1.0


def test_int_cast_rounds_and_saturates():
    a = np.array([[1.6, -2.5, 300.0, -300.0]], np.float32)
    out = nki.simulate(_cast_kernel(nl.int8))(a)
    np.testing.assert_array_equal(out, [[2, -2, 127, -128]])


def test_64_bit_inputs_rejected():
    with pytest.raises(ValueError, match="Unsupported dtype"):
        nki.simulate(_cast_kernel(nl.float32))(np.zeros((2, 2), np.float64))


def test_bf16_inputs_roundtrip(rng):
    a = rng.standard_normal((8, 8)).astype(ml_dtypes.bfloat16)

    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a))
        return out
    out = nki.simulate(k)(a)
    assert out.dtype == a.dtype
    np.testing.assert_array_equal(out, a)
