"""FP8 and MXFP8 matmuls on neuron (`torch._scaled_mm`, `torch._scaled_mm_v2` /
`torch.nn.functional.scaled_mm`), against a CPU reference of the same quantisation.

FP8 with float32 scales equals CPU's own kernel. MXFP8 (PyTorch 2.13's CPU kernel has no MX path)
equals dequantise-then-matmul in float32 on CPU, with the operands quantised by torchao's
`MXTensor.to_mx` and the swizzled scales written by torchao's `to_blocked`, as torchao's MX recipe
passes them to `torch._scaled_mm` on CUDA; eager and compiled. MXFP8 needs trn3 (the default target, trn2, lacks it),
so those checks run in a child configured for trn3.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.nn.functional import ScalingType, SwizzleType

from tests.numerics.helpers import run_mode

N_ = "neuron"
TRN3 = {"TORCH_NEURONX_INSTANCE_TYPE": "trn3.3xlarge"}


def _fp8(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * 4).to(dtype)


# torch 2.13's CPU kernel takes row-wise scales for float8_e4m3fn only
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("scaling, elem", [("tensorwise", torch.float8_e4m3fn), ("tensorwise", torch.float8_e5m2),
                                           ("rowwise", torch.float8_e4m3fn)])
def test_fp8_scaled_mm_equals_cpu(scaling, elem, out_dtype):
    m, k, n = 24, 64, 48
    a, b = _fp8((m, k), elem, 1), _fp8((n, k), elem, 2).t()
    if scaling == "tensorwise":
        sa, sb = torch.tensor(0.5), torch.tensor(2.0)
    else:
        sa, sb = torch.rand(m, 1) + 0.5, torch.rand(1, n) + 0.5
    bias = torch.randn(n).to(out_dtype)
    want = torch._scaled_mm(a, b, sa, sb, bias=bias, out_dtype=out_dtype)
    got = torch._scaled_mm(a.to(N_), b.to(N_), sa.to(N_), sb.to(N_), bias=bias.to(N_), out_dtype=out_dtype)
    assert got.device.type == N_ and got.dtype == out_dtype
    assert torch.equal(got.cpu(), want)


def _mx_operands(m=8, k=64, n=16, elem=torch.float8_e4m3fn):
    """e8m0 scales of plausible shapes for argument checks (values do not matter there)."""
    a, b = _fp8((m, k), elem, 3), _fp8((n, k), elem, 4).t()
    s = lambda rows: torch.full((rows, k // 32), 127, dtype=torch.uint8).view(torch.float8_e8m0fnu)  # noqa: E731
    return a, b, s(m), s(n)


def _v2(a, b, sa, sb, swizzle=SwizzleType.NO_SWIZZLE, out=torch.bfloat16):
    return F.scaled_mm(a, b, sa, ScalingType.BlockWise1x32, sb, ScalingType.BlockWise1x32,
                       swizzle_a=swizzle, swizzle_b=swizzle, output_dtype=out)


def test_mxfp8_on_trn2_says_trn2_lacks_it():
    a, b, sa, sb = (t.to(N_) for t in _mx_operands())
    with pytest.raises(RuntimeError, match=r"trn2\.3xlarge \(trn2\) lacks.*TORCH_NEURONX_INSTANCE_TYPE"):
        _v2(a, b, sa, sb)


@pytest.mark.parametrize("case, pattern", [
    ("k_not_32", r"K \(self\.size\(1\) = 48\) must be a multiple of 32.*pad both operands with zeros along K to 64"),
    ("scale_b_float32", r"scale_b has dtype torch\.float32; MXFP8 scales are torch\.float8_e8m0fnu"),
    ("scale_a_shape", r"scale_a has shape \[8, 1\]; with NO_SWIZZLE it must be \[M, K/32\] = \[8, 2\]"),
    ("swizzled_numel", r"scale_a has 16 elements; the swizzled \(SWIZZLE_32_4_4\) layout .* has 512"),
    ("out_fp8", r"out_dtype=torch\.float8_e4m3fn is not an MX matmul output"),
    ("elem_int8", r"self has dtype torch\.int8; MXFP8 elements are OCP"),
])
def test_mxfp8_bad_input_names_the_argument(case, pattern):
    a, b, sa, sb = _mx_operands()
    if case == "k_not_32":
        a, b, sa, sb = _mx_operands(k=48)
    with pytest.raises(ValueError, match=pattern):
        if case == "scale_b_float32":
            _v2(a.to(N_), b.to(N_), sa.to(N_), torch.ones(16, 2, device=N_))
        elif case == "scale_a_shape":
            _v2(a.to(N_), b.to(N_), sa[:, :1].contiguous().to(N_), sb.to(N_))
        elif case == "swizzled_numel":   # a flat scale tensor is the swizzled layout
            torch._scaled_mm(a.to(N_), b.to(N_), sa.flatten().to(N_), sb.flatten().to(N_), out_dtype=torch.bfloat16)
        elif case == "out_fp8":
            _v2(a.to(N_), b.to(N_), sa.to(N_), sb.to(N_), out=torch.float8_e4m3fn)
        elif case == "elem_int8":
            torch._scaled_mm(a.view(torch.int8).to(N_), b.to(N_), sa.to(N_), sb.to(N_), out_dtype=torch.bfloat16)
        else:
            _v2(a.to(N_), b.to(N_), sa.to(N_), sb.to(N_))


# One trn3 child: every MXFP8 form against the CPU reference, and torchao's MX linear on neuron.
_MX_CHILD = r"""
import torch, torch_neuronx
import torch.nn.functional as F
from torch.nn.functional import ScalingType, SwizzleType
from torchao.prototype.mx_formats.mx_tensor import MXTensor
from torchao.prototype.mx_formats.utils import to_blocked

result = {}
M, K, N = 200, 96, 136          # M and N not multiples of 128: the swizzled layout pads them
n = lambda t: t.to("neuron")

def reference(a, b, bias, out_dtype):
    # dequantise-then-matmul in float32 on CPU: each element times its block's power of two
    deq = lambda q: q.qdata.float() * q.scale.float().view(q.qdata.shape[0], -1).repeat_interleave(32, 1)
    y = deq(a) @ deq(b).t()
    return (y if bias is None else y + bias.float()).to(out_dtype)

g = torch.Generator().manual_seed(0)
x, w, bias = torch.randn(M, K, generator=g) * 3, torch.randn(N, K, generator=g), torch.randn(N, generator=g)
for elem in (torch.float8_e4m3fn, torch.float8_e5m2):
    a, b = MXTensor.to_mx(x, elem, 32), MXTensor.to_mx(w, elem, 32)
    sa, sb = a.scale.view(M, K // 32), b.scale.view(N, K // 32)
    for out_dtype in (torch.float32, torch.bfloat16):
        want = reference(a, b, bias.to(out_dtype), out_dtype)   # the bias the op is given
        v1 = torch._scaled_mm(n(a.qdata), n(b.qdata).t(), n(to_blocked(sa)), n(to_blocked(sb)),
                              bias=n(bias.to(out_dtype)) if out_dtype == torch.float32 else None,
                              out_dtype=out_dtype)
        want_v1 = want if out_dtype == torch.float32 else reference(a, b, None, out_dtype)
        for swz, (ta, tb) in ((SwizzleType.NO_SWIZZLE, (sa, sb)), (SwizzleType.SWIZZLE_32_4_4, (to_blocked(sa), to_blocked(sb)))):
            v2 = F.scaled_mm(n(a.qdata), n(b.qdata).t(), n(ta), ScalingType.BlockWise1x32, n(tb),
                             ScalingType.BlockWise1x32, swizzle_a=swz, swizzle_b=swz,
                             bias=n(bias.to(out_dtype)), output_dtype=out_dtype)
            result[f"v2 {elem} {out_dtype} {swz}"] = [v2.device.type, str(v2.dtype) == str(out_dtype),
                                                      torch.equal(v2.cpu(), want)]
        result[f"v1 {elem} {out_dtype}"] = ["neuron", True, torch.equal(v1.cpu(), want_v1)]
        # plain 2-D [M, K/32] scales, and both calls compiled (Inductor lowers _scaled_mm_v2 to _scaled_mm.out)
        plain = torch._scaled_mm(n(a.qdata), n(b.qdata).t(), n(sa), n(sb), out_dtype=out_dtype)
        no_bias = reference(a, b, None, out_dtype)
        result[f"v1 plain {elem} {out_dtype}"] = ["neuron", True, torch.equal(plain.cpu(), no_bias)]
        v2c = torch.compile(lambda qa, qb, ta, tb: F.scaled_mm(
            qa, qb.t(), ta, ScalingType.BlockWise1x32, tb, ScalingType.BlockWise1x32,
            swizzle_a=SwizzleType.NO_SWIZZLE, swizzle_b=SwizzleType.NO_SWIZZLE, output_dtype=out_dtype),
            backend="neuron")(n(a.qdata), n(b.qdata), n(sa), n(sb))
        v1c = torch.compile(lambda qa, qb, ta, tb: torch._scaled_mm(qa, qb.t(), ta, tb, out_dtype=out_dtype),
                            backend="neuron")(n(a.qdata), n(b.qdata), n(to_blocked(sa)), n(to_blocked(sb)))
        result[f"compiled {elem} {out_dtype}"] = ["neuron", True, torch.equal(v2c.cpu(), no_bias) and torch.equal(v1c.cpu(), no_bias)]
        result[f"nonzero {elem} {out_dtype}"] = bool(want.abs().sum() > 0)

# torchao's MX inference linear (KernelPreference.AUTO: torch._scaled_mm with swizzled e8m0 scales)
from torchao.quantization import quantize_
from torchao.prototype.mx_formats import MXDynamicActivationMXWeightConfig, ScaleCalculationMode
torch.manual_seed(0)
cpu = torch.nn.Linear(128, 64, dtype=torch.bfloat16)
lin = torch.nn.Linear(128, 64, dtype=torch.bfloat16).to("neuron")
lin.load_state_dict(cpu.state_dict())
quantize_(lin, MXDynamicActivationMXWeightConfig())
xb = torch.randn(8, 128, dtype=torch.bfloat16)
y = lin(n(xb))
R = ScaleCalculationMode.RCEIL    # the config's scale rule
qa, qw = MXTensor.to_mx(xb, torch.float8_e4m3fn, 32, scaling_mode=R), MXTensor.to_mx(cpu.weight, torch.float8_e4m3fn, 32, scaling_mode=R)
result["torchao linear"] = [y.device.type, torch.equal(y.detach().cpu(), reference(qa, qw, cpu.bias.detach(), torch.bfloat16))]
"""


def test_mxfp8_equals_cpu_reference_on_trn3():
    result, _ = run_mode(_MX_CHILD, TRN3, timeout=300)
    assert result.pop("torchao linear") == ["neuron", True]
    nonzero = {k: result.pop(k) for k in list(result) if k.startswith("nonzero")}
    assert all(nonzero.values())
    assert len(result) == 20
    bad = {k: v for k, v in result.items() if v != ["neuron", True, True]}
    assert not bad, bad
