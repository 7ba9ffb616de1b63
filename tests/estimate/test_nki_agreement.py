"""Two models of one chip agree: the op-level estimate of an ATen op and the NKI simulator's
estimate of the well-tiled kernel are within 25% (trn2, one physical core: LNC=1; the simulator
models one kernel, so the op's launch overhead is left out of the comparison)."""
import ml_dtypes
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import nki
from nki.examples import matmul, rmsnorm
from tests.estimate.nki_kernels import softmax_rows
from torch_neuronx.estimate import hardware, op_estimate
from torch_neuronx.estimate.graphs import estimate_graph

HW = hardware("trn2.3xlarge", 1)
aten = torch.ops.aten


def _close(ours, sim, what):
    assert 0.75 <= ours / sim <= 1.25, f"{what}: estimate {ours * 1e6:.1f} us vs simulator {sim * 1e6:.1f} us"


@pytest.mark.parametrize("k,m,n", [(1024, 1024, 1024), (1024, 2048, 1024)])
def test_tiled_bf16_matmul(k, m, n):
    rng = np.random.default_rng(0)
    lhsT = rng.standard_normal((k, m)).astype(ml_dtypes.bfloat16)
    rhs = rng.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    nki.simulate(matmul.matmul_optimized, target="trn2")(lhsT, rhs)
    sim = nki.last_run().total_ns * 1e-9
    a = torch.empty(m, k, dtype=torch.bfloat16, device="meta")
    b = torch.empty(k, n, dtype=torch.bfloat16, device="meta")
    e = op_estimate(aten.mm.default, (a, b), {}, a @ b, hardware=HW, launch_s=0.0)
    _close(e.seconds, sim, f"mm {m}x{k}x{n}")


def _fused(fn, *shapes):
    """Estimate fn as one fused program (what Inductor makes of a composite op such as rms_norm)."""
    gm = torch.fx.symbolic_trace(fn)
    args = [torch.empty(s, device="meta") for s in shapes]
    g = estimate_graph(gm, args, HW, backward=False)["forward"]
    return g.seconds - g.launch_s


def test_rmsnorm():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2048, 2048)).astype(np.float32)
    g = rng.standard_normal((2048,)).astype(np.float32)
    nki.simulate(rmsnorm.rmsnorm, target="trn2")(a, g)
    sim = nki.last_run().total_ns * 1e-9
    ours = _fused(lambda x, w: F.rms_norm(x, (2048,), w, 1e-6), (2048, 2048), (2048,))
    _close(ours, sim, "rms_norm 2048x2048 fp32")


def test_softmax():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2048, 2048)).astype(np.float32)
    out = nki.simulate(softmax_rows, target="trn2")(a)
    np.testing.assert_allclose(out, torch.softmax(torch.from_numpy(a), -1).numpy(), rtol=1e-5, atol=1e-6)
    sim = nki.last_run().total_ns * 1e-9
    x = torch.empty(2048, 2048, device="meta")
    e = op_estimate(aten._softmax.default, (x, -1, False), {}, torch.softmax(x, -1), hardware=HW, launch_s=0.0)
    _close(e.seconds, sim, "softmax 2048x2048 fp32")
