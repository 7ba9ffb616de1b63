"""Two models of one chip agree: the op-level estimate of an ATen op and the NKI simulator's
estimate of the well-tiled kernel are within 10% (trn2, one physical core: LNC=1; the simulator
models one kernel, so the op's launch overhead is left out of the comparison).

Nothing in the op model is fitted to these runs: the simulator charges the TensorEngine its
published peak (its PE cost rule), so the comparison sets matmul_efficiency to 1 (the default is
the fraction of peak real kernels sustain, a separate assumption); the matmul's pipeline fill is the
DMA of its resident operand and first streamed block at the facts' HBM bandwidth. Shapes and
dtypes span bf16 and fp32, square and skinny, none of them chosen to tune a constant."""
import ml_dtypes
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import nki
from nki.examples import matmul, rmsnorm
from tests.estimate.nki_kernels import softmax_rows
from torch_neuronx.estimate import hardware, op_estimate
from torch_neuronx.estimate._graphs import estimate_graph

HW = hardware("trn2.3xlarge", 1, assumptions={"matmul_efficiency": 1.0})
aten = torch.ops.aten


def _close(ours, sim, what):
    assert 0.9 <= ours / sim <= 1.1, f"{what}: estimate {ours * 1e6:.1f} us vs simulator {sim * 1e6:.1f} us"


@pytest.mark.parametrize("k,m,n,dtype", [(1024, 1024, 1024, "bfloat16"), (1024, 2048, 1024, "bfloat16"),
                                         (512, 1024, 2048, "bfloat16"), (2048, 512, 1024, "bfloat16"),
                                         (2048, 1024, 512, "bfloat16"), (1024, 1024, 1024, "float32"),
                                         (512, 512, 2048, "float32")])
def test_tiled_matmul(k, m, n, dtype):
    rng = np.random.default_rng(0)
    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32
    lhsT = rng.standard_normal((k, m)).astype(np_dtype)
    rhs = rng.standard_normal((k, n)).astype(np_dtype)
    nki.simulate(matmul.matmul_optimized, target="trn2")(lhsT, rhs)
    sim = nki.last_run().total_ns * 1e-9
    a = torch.empty(m, k, dtype=getattr(torch, dtype), device="meta")
    b = torch.empty(k, n, dtype=getattr(torch, dtype), device="meta")
    e = op_estimate(aten.mm.default, (a, b), {}, a @ b, hardware=HW, launch_s=0.0)
    _close(e.seconds, sim, f"mm {m}x{k}x{n} {dtype}")


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


@pytest.mark.parametrize("rows,cols", [(2048, 2048), (1024, 4096)])
def test_softmax(rows, cols):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((rows, cols)).astype(np.float32)
    out = nki.simulate(softmax_rows, target="trn2")(a)
    np.testing.assert_allclose(out, torch.softmax(torch.from_numpy(a), -1).numpy(), rtol=1e-5, atol=1e-6)
    sim = nki.last_run().total_ns * 1e-9
    x = torch.empty(rows, cols, device="meta")
    e = op_estimate(aten._softmax.default, (x, -1, False), {}, torch.softmax(x, -1), hardware=HW, launch_s=0.0)
    _close(e.seconds, sim, f"softmax {rows}x{cols} fp32")
