"""FP8 and MXFP8 matmuls under TORCH_NEURONX_NUMERICS=trainium on a trn3 target: TensorE's FP32
result rounded once to the output dtype, round-to-nearest-even by default (equal to the host
kernel) and stochastically with NEURON_RT_STOCHASTIC_ROUNDING_EN=1 (each element one of the two
bf16 neighbours of the FP32 result, unbiased). Trn3's E4M3 is OCP float8_e4m3fn, so an MXFP8
operand up to +-448 keeps its value there, while a trn2 target still models Neuron's +-240."""

from .helpers import run_mode

TRN3 = {"TORCH_NEURONX_INSTANCE_TYPE": "trn3.3xlarge", "TORCH_NEURONX_NUMERICS": "trainium"}

CHILD = r'''
import warnings
import torch, torch_neuronx
import torch.nn.functional as F
from torch.nn.functional import ScalingType, SwizzleType
warnings.simplefilter("always")
result = {}
M, K, N = 64, 256, 96
g = torch.Generator().manual_seed(0)
a = (torch.randn(M, K, generator=g) * 20).to(torch.float8_e4m3fn)
b = (torch.randn(N, K, generator=g) * 20).to(torch.float8_e4m3fn)
sa = torch.randint(120, 130, (M, K // 32), generator=g, dtype=torch.uint8).view(torch.float8_e8m0fnu)
sb = torch.randint(120, 130, (N, K // 32), generator=g, dtype=torch.uint8).view(torch.float8_e8m0fnu)
deq = lambda q, s: q.float() * s.float().repeat_interleave(32, 1)
fp32 = deq(a, sa) @ deq(b, sb).t()                      # the CPU reference of the same quantisation
n = lambda t: t.to("neuron")
def mx(out_dtype):
    return F.scaled_mm(n(a), n(b).t(), n(sa), ScalingType.BlockWise1x32, n(sb), ScalingType.BlockWise1x32,
                       swizzle_a=SwizzleType.NO_SWIZZLE, swizzle_b=SwizzleType.NO_SWIZZLE,
                       output_dtype=out_dtype).cpu()
def neighbours(x):
    """The two bf16 values around each float32 value."""
    near = x.to(torch.bfloat16)
    bits = near.view(torch.int16).to(torch.int32)
    other = torch.where(near.float() > x.abs() * x.sign(), bits - x.sign().to(torch.int32), bits + x.sign().to(torch.int32))
    return near.float(), other.to(torch.int16).view(torch.bfloat16).float()
with warnings.catch_warnings(record=True) as caught:
    got32, got16 = mx(torch.float32), mx(torch.bfloat16)
    s1 = torch.tensor(0.25)
    fp8_16 = torch._scaled_mm(n(a), n(b).t(), n(s1), n(s1), out_dtype=torch.bfloat16).cpu()
    fp8_32 = torch._scaled_mm(a, b.t(), s1, s1, out_dtype=torch.float32)
result["warnings"] = [str(w.message) for w in caught if "emulated" in str(w.message)]
result["fp32_equal"] = torch.equal(got32, fp32)
for name, got, wide in (("mx", got16, fp32), ("fp8", fp8_16, fp8_32)):
    near, other = neighbours(wide)
    g = got.float()
    result[name + "_in_neighbours"] = bool(((g == near) | (g == other)).all())
    result[name + "_rne_fraction"] = (g == near).float().mean().item()
    result[name + "_bias"] = ((g - wide) / (other - near).abs().clamp_min(1e-30)).mean().item()
x = torch.tensor([416.0, -448.0, 96.0], device="neuron").to(torch.float8_e4m3fn)
result["e4m3fn"] = x.float().cpu().tolist()
'''


def test_trainium_numerics_round_to_nearest_equals_the_cpu_reference():
    r, _ = run_mode(CHILD, TRN3)
    assert r["warnings"] == []
    assert r["fp32_equal"] is True
    for name in ("mx", "fp8"):
        assert r[name + "_in_neighbours"] is True and r[name + "_rne_fraction"] == 1.0, name
    assert r["e4m3fn"] == [416.0, -448.0, 96.0]     # OCP e4m3fn on trn3: no +-240 overflow


def test_trainium_stochastic_rounding_of_the_fp32_result():
    r, _ = run_mode(CHILD, {**TRN3, "NEURON_RT_STOCHASTIC_ROUNDING_EN": "1"})
    assert r["warnings"] == []            # both ops emulated, none left to host numerics
    assert r["fp32_equal"] is True        # an fp32 output is not rounded
    for name in ("mx", "fp8"):
        assert r[name + "_in_neighbours"] is True, name
        assert 0.3 < r[name + "_rne_fraction"] < 0.9, name   # many round away from the nearest
        assert abs(r[name + "_bias"]) < 0.05, name            # unbiased: the mean error is ~0 ulp


def test_trn2_target_keeps_neuron_e4m3_range():
    r, _ = run_mode(CHILD.split("with warnings.catch_warnings")[0] + '''
x = torch.tensor([416.0, 96.0], device="neuron").to(torch.float8_e4m3fn)
result["e4m3fn"] = [str(v) for v in x.float().cpu().tolist()]
''', {"TORCH_NEURONX_NUMERICS": "trainium"})
    assert r["e4m3fn"] == ["nan", "96.0"]
