"""The cost of FP8 and MXFP8 matmuls: 2 x M x K x N FLOPs at the TensorE rate of the format, from
neuron_hardware's one table: MXFP8 (float8_e8m0fnu block scales) at trn3's 315 TFLOPS per
physical core, FP8 with float32 scales at the operands' FP8 rate (158 on trn2); trn2 has no MXFP8,
and the estimate says so."""
import subprocess
import sys

import pytest
import torch

import neuron_hardware
from torch_neuronx.estimate import hardware, op_estimate

aten = torch.ops.aten
M, K, N = 512, 1024, 768


def _meta(*shape, dtype):
    return torch.empty(*shape, dtype=dtype, device="meta")


def _operands(mx: bool):
    a = _meta(M, K, dtype=torch.float8_e4m3fn)
    b = _meta(N, K, dtype=torch.float8_e4m3fn).t()
    if mx:
        sa, sb = _meta(M * K // 32, dtype=torch.float8_e8m0fnu), _meta(N * K // 32, dtype=torch.float8_e8m0fnu)
    else:
        sa, sb = _meta((), dtype=torch.float32), _meta((), dtype=torch.float32)
    return a, b, sa, sb, _meta(M, N, dtype=torch.bfloat16)


def _v1(instance, mx):
    a, b, sa, sb, out = _operands(mx)
    return op_estimate(aten._scaled_mm.default, (a, b, sa, sb), {"out_dtype": torch.bfloat16}, out,
                       hardware=hardware(instance, 1))


def _v2(instance, mx):
    a, b, sa, sb, out = _operands(mx)
    recipe = [3] if mx else [0]            # ScalingType.BlockWise1x32 / TensorWise
    return op_estimate(aten._scaled_mm_v2.default, (a, b, [sa], recipe, [], [sb], recipe, [], None,
                                                     torch.bfloat16), {}, out, hardware=hardware(instance, 1))


def _matmul_seconds(e, instance):
    return e.tensor_parts[0] * hardware(instance, 1).assumptions.matmul_efficiency


@pytest.mark.parametrize("call", [_v1, _v2])
def test_mxfp8_runs_at_trn3_mxfp8_rate(call):
    e = call("trn3.3xlarge", mx=True)
    assert e.engine == "tensor" and e.category == "matmul" and e.dtype == "mxfp8"
    assert e.flops == 2 * M * K * N
    assert neuron_hardware.chip("trn3").tensor_flops["mxfp8"] == 315e12
    assert _matmul_seconds(e, "trn3.3xlarge") == pytest.approx(2 * M * K * N / 315e12)


@pytest.mark.parametrize("call", [_v1, _v2])
def test_fp8_on_trn2_at_its_fp8_rate_and_mxfp8_twice_as_fast_on_trn3(call):
    fp8_trn2 = call("trn2.3xlarge", mx=False)
    assert fp8_trn2.dtype == "float8_e4m3fn"
    assert _matmul_seconds(fp8_trn2, "trn2.3xlarge") == pytest.approx(2 * M * K * N / 158e12)
    ratio = _matmul_seconds(call("trn3.3xlarge", mx=True), "trn3.3xlarge") / _matmul_seconds(fp8_trn2, "trn2.3xlarge")
    assert ratio == pytest.approx(158 / 315)


@pytest.mark.parametrize("call", [_v1, _v2])
def test_mxfp8_on_trn2_says_trn2_lacks_it(call):
    assert "mxfp8" not in neuron_hardware.chip("trn2").tensor_flops
    with pytest.raises(ValueError, match=r"MXFP8 rate, which trn2\.3xlarge LNC=1 \(trn2, NeuronCore-v3\) "
                                         r"lacks; chips with it: trn3\. Estimate for one of them"):
        call("trn2.3xlarge", mx=True)


_PROGRAM = """
import torch
import torch.nn.functional as F
from torch.nn.functional import ScalingType, SwizzleType
M, K, N = 4096, 4096, 4096                     # above the dry run's size for real execution
a = torch.randn(M, K, device="neuron").to(torch.float8_e4m3fn)
b = torch.randn(N, K, device="neuron").to(torch.float8_e4m3fn)
s = lambda r: torch.full((r, K // 32), 127, dtype=torch.uint8, device="neuron").view(torch.float8_e8m0fnu)
y = F.scaled_mm(a, b.t(), s(M), ScalingType.BlockWise1x32, s(N), ScalingType.BlockWise1x32,
                swizzle_a=SwizzleType.NO_SWIZZLE, swizzle_b=SwizzleType.NO_SWIZZLE, output_dtype=torch.bfloat16)
print(tuple(y.shape), y.dtype)
"""


def test_plan_runs_mxfp8_on_trn3_and_stops_on_trn2_as_the_run_would(tmp_path):
    script = tmp_path / "mx.py"
    script.write_text(_PROGRAM)

    def run(instance):
        return subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "run", "--quiet", "--instance", instance,
                               "--", str(script)], capture_output=True, text=True, timeout=300)

    ok = run("trn3.3xlarge")
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert "(4096, 4096) torch.bfloat16" in ok.stdout and "Dry run on trn3.3xlarge" in ok.stdout
    assert "_scaled_mm_v2" not in ok.stdout      # costed as a matmul, not listed as a fallback or unmodelled
    bad = run("trn2.3xlarge")
    assert bad.returncode != 0
    assert "MXUnsupportedError: torch._scaled_mm_v2: MXFP8" in bad.stderr and "trn2.3xlarge (trn2) lacks" in bad.stderr
