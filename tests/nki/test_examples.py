"""The four canonical kernels against numpy references (fp32 and bf16)."""
import ml_dtypes
import numpy as np
import pytest

from nki.examples import attention, matmul, rmsnorm, tensor_add

BF16 = ml_dtypes.bfloat16


def test_tensor_add_variants(rng):
    a, b = rng.standard_normal((2, 256, 1024), dtype=np.float32)
    np.testing.assert_array_equal(tensor_add.tensor_add_tiled(a, b), a + b)
    np.testing.assert_array_equal(tensor_add.tensor_add_spmd[2, 2](a, b), a + b)
    np.testing.assert_array_equal(tensor_add.tensor_add_tile(a[:100], b[:100]), (a + b)[:100])
    ab, bb = a.astype(BF16), b.astype(BF16)
    out = tensor_add.tensor_add_tiled(ab, bb)
    assert out.dtype == BF16
    np.testing.assert_array_equal(out, (ab.astype(np.float32) + bb.astype(np.float32)).astype(BF16))


@pytest.mark.parametrize("name", ["matmul_tiled", "matmul_hoisted", "matmul_blocked",
                                  "matmul_optimized"])
def test_matmul_progression(name, rng):
    lhsT = rng.standard_normal((256, 256), dtype=np.float32)
    rhs = rng.standard_normal((256, 1024), dtype=np.float32)
    kernel = getattr(matmul, name)
    out = kernel(lhsT, rhs, block_n=2) if name == "matmul_blocked" else kernel(lhsT, rhs)
    np.testing.assert_allclose(out, lhsT.T @ rhs, rtol=1e-4, atol=1e-3)


def test_matmul_basic_bf16(rng):
    lhsT = rng.standard_normal((128, 64)).astype(BF16)
    rhs = rng.standard_normal((128, 512)).astype(BF16)
    out = matmul.matmul_basic(lhsT, rhs)
    ref = (lhsT.astype(np.float32).T @ rhs.astype(np.float32)).astype(BF16)
    assert out.dtype == BF16
    np.testing.assert_allclose(out.astype(np.float32), ref.astype(np.float32), rtol=1e-2)


@pytest.mark.parametrize("rows", [128, 300, 77])
def test_rmsnorm_ragged_tails(rows, rng):
    a = rng.standard_normal((rows, 256), dtype=np.float32)
    g = rng.standard_normal(256, dtype=np.float32)
    ref = a / np.sqrt((a * a).mean(1, keepdims=True) + 1e-6) * g
    np.testing.assert_allclose(rmsnorm.rmsnorm(a, g), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rmsnorm.rmsnorm_nl(a, g), ref, rtol=1e-5, atol=1e-5)


def test_rmsnorm_bf16(rng):
    a = rng.standard_normal((200, 128)).astype(BF16)
    g = rng.standard_normal(128).astype(BF16)
    af, gf = a.astype(np.float32), g.astype(np.float32)
    ref = af / np.sqrt((af * af).mean(1, keepdims=True) + 1e-6) * gf
    out = rmsnorm.rmsnorm(a, g)
    assert out.dtype == BF16
    np.testing.assert_allclose(out.astype(np.float32), ref, rtol=2e-2, atol=2e-2)


def test_layernorm_bn_stats(rng):
    a = rng.standard_normal((150, 700), dtype=np.float32) * 2 + 3
    g, b = rng.standard_normal((2, 700), dtype=np.float32)
    ref = (a - a.mean(1, keepdims=True)) / np.sqrt(a.var(1, keepdims=True) + 1e-5) * g + b
    np.testing.assert_allclose(rmsnorm.layernorm(a, g, b), ref, rtol=1e-4, atol=1e-4)


def _attention_ref(q, k, v, causal):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = q @ k.T / np.sqrt(q.shape[1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape)) > 0, s, -np.inf)
    p = np.exp(s - s.max(1, keepdims=True))
    return (p / p.sum(1, keepdims=True)) @ v


@pytest.mark.parametrize("causal,kblock", [(True, 256), (True, 512), (False, 256)])
def test_flash_attention(causal, kblock, rng):
    q, k, v = rng.standard_normal((3, 512, 64), dtype=np.float32)
    out = attention.flash_attention(q, k, v, causal=causal, kblock=kblock)
    np.testing.assert_allclose(out, _attention_ref(q, k, v, causal), rtol=1e-4, atol=1e-5)


def test_flash_attention_bf16(rng):
    q, k, v = (x.astype(BF16) for x in rng.standard_normal((3, 256, 128), dtype=np.float32))
    out = attention.flash_attention(q, k, v, causal=True, kblock=256)
    assert out.dtype == BF16
    np.testing.assert_allclose(out.astype(np.float32), _attention_ref(q, k, v, True), atol=3e-2)
