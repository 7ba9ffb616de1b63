"""TORCH_NEURONX_NUMERICS=check: results stay the CPU's; each place Trainium would
differ is reported once per op and source line, with its worst value and advice."""
import pytest

from .helpers import run_mode

CHECK = r'''
import torch, torch_neuronx
from torch_neuronx import numerics
line = {}
def here(name):
    import sys
    line[name] = sys._getframe(1).f_lineno
r = {}
def same(name, neuron, cpu):
    r[name] = bool(torch.equal(neuron.cpu(), cpu)) if neuron.dtype == cpu.dtype else False

big = torch.tensor([2**31 - 1, 5, -3])
x = big.to("neuron")
here("int64_add"); y = x + 1
same("int64_add", y, big + 1)
for _ in range(3):
    here("int64_loop"); z = x * 4
small = torch.arange(10, device="neuron") + 7                     # int64 in range: exposure, no finding
here("int64_scalar"); back = (small - 2**40) + 2**40              # result in range; the scalar is not
same("int64_scalar", back, torch.arange(10) + 7)
a = torch.full((4, 4), 4097, dtype=torch.int32)
here("int_mm"); m = a.to("neuron") @ a.to("neuron")
same("int_mm", m, a @ a)
ok_mm = torch.full((4, 4), 3, dtype=torch.int32, device="neuron") @ torch.full((4, 4), 3, dtype=torch.int32, device="neuron")
idx = torch.tensor([0, 0], device="neuron")
here("index_add"); t = torch.zeros(3, dtype=torch.int64, device="neuron").index_add_(0, idx, torch.tensor([2**24, 1], device="neuron"))
same("index_add", t, torch.tensor([2**24 + 1, 0, 0]))
src = torch.tensor([[2**24, 1]], dtype=torch.int32)
here("scatter_add"); s = torch.zeros(1, 1, dtype=torch.int32, device="neuron").scatter_add(1, torch.zeros(1, 2, dtype=torch.int64, device="neuron"), src.to("neuron"))
same("scatter_add", s, torch.zeros(1, 1, dtype=torch.int32).scatter_add(1, torch.zeros(1, 2, dtype=torch.int64), src))
d = torch.tensor([1 / 3, 1e-10], dtype=torch.float64)
here("float64"); e = d.to("neuron") * 3
same("float64", e, d * 3)
f = torch.tensor([100., 239., 300., 448.])
here("fp8"); q = f.to("neuron").to(torch.float8_e4m3fn)
same("fp8", q.float(), f.to(torch.float8_e4m3fn).float())
# reference rounding test (A3): round-to-nearest-even without stochastic rounding
h = torch.tensor(1024.0, dtype=torch.float16, device="neuron")
for _ in range(2048):
    h += 0.5
r["rne_1024"] = h.item()
# integer all-reduce (a one-rank group): the float32 reduction would round 2^24 + 1
import tempfile, torch.distributed as dist
dist.init_process_group("neuron", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
c = torch.tensor([2**24 + 1, 2], device="neuron")
here("all_reduce"); dist.all_reduce(c)
r["all_reduce"] = c.cpu().tolist()
import warnings
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    cc = [torch.tensor([2**24 + 3], device="neuron")]
    here("all_reduce_coalesced"); dist.all_reduce_coalesced(cc)
o = torch.zeros(1, dtype=torch.int32, device="neuron")
with dist._coalescing_manager():
    here("rs_coalesced"); dist.reduce_scatter_tensor(o, torch.tensor([2**25 + 1], dtype=torch.int32, device="neuron"))
r["coalesced"] = [cc[0].item(), o.item()]
dist.destroy_process_group()
# training step on a float32 model: nothing to report
lin = torch.nn.Linear(8, 4).to("neuron")
lin(torch.randn(2, 8, device="neuron")).sum().backward()
result = {"same": r, "line": line, "findings": numerics.findings(), "exposure": numerics.exposure(),
          "report": numerics.numerics_report(), "stack": torch._C._len_torch_dispatch_stack(),
          "filter": numerics.cpp_filter.active()}
'''


@pytest.fixture(scope="module")
def check_run():
    return run_mode(CHECK, {"TORCH_NEURONX_NUMERICS": "check"})


def _site(result, kind, name, op=None):
    line = result["line"][name]
    hits = [f for f in result["findings"] if f["kind"] == kind and f["site"].endswith(f":{line}")
            and (op is None or f["op"] == op)]
    assert len(hits) == 1, (kind, name, line, result["findings"])
    return hits[0]


def test_results_unchanged(check_run):
    result, _ = check_run
    # installed behind the C++ filter, or (a torch that uses the filter's key) as a Python mode
    assert (result["filter"], result["stack"]) in ((True, 0), (False, 1))
    assert all(result["same"][k] for k in ("int64_add", "int64_scalar", "int_mm", "index_add", "scatter_add", "float64",
                                          "fp8")), \
        result["same"]
    assert result["same"]["rne_1024"] == 1024.0
    assert result["same"]["all_reduce"] == [2**24 + 1, 2]


def test_int64_out_of_range_reported_with_op_line_value(check_run):
    result, _ = check_run
    f = _site(result, "int64", "int64_add")
    assert f["op"] == "aten::add" and f["worst"] == 2**31 and f["count"] == 1
    assert "int64 -> int32" in f["message"] and "--native-int64" in f["advice"]
    loop = _site(result, "int64", "int64_loop")
    assert loop["op"] == "aten::mul" and loop["count"] == 3 and loop["worst"] == (2**31 - 1) * 4
    assert result["exposure"]["int64"]["aten::add"] >= 2  # the in-range arange + 7 is counted, not reported
    scalar = [f for f in result["findings"] if f["kind"] == "int64" and f["detail"] == "Python int scalar"
              and f["site"].endswith(f":{result['line']['int64_scalar']}")]
    assert sorted(f["op"] for f in scalar) == ["aten::add", "aten::sub"], scalar   # t + 2**40 beyond 32 bits
    assert all(f["worst"] == 2**40 for f in scalar)


def test_integers_via_fp32_reported_above_2_24(check_run):
    result, _ = check_run
    assert _site(result, "int_via_fp32", "int_mm")["worst"] == 4097 * 4097 * 4
    assert _site(result, "int_via_fp32", "index_add")["worst"] == 2**24 + 1
    assert _site(result, "int_via_fp32", "scatter_add")["worst"] == 2**24 + 1
    assert _site(result, "int_via_fp32", "all_reduce", "all_reduce")["worst"] == 2**24 + 1
    assert _site(result, "int_via_fp32", "all_reduce_coalesced", "all_reduce_coalesced")["worst"] == 2**24 + 3
    assert result["same"]["coalesced"] == [2**24 + 3, 2**25 + 1]   # check mode: results unchanged
    rs = [f for f in result["findings"] if f["op"] == "reduce_scatter_tensor_coalesced"]
    assert [f["worst"] for f in rs] == [2**25 + 1], rs   # reported where the coalescing block ends
    mm_sites = [f for f in result["findings"] if f["op"] == "aten::mm"]
    assert len(mm_sites) == 1  # the exact 3x3 product is not reported
    assert result["exposure"]["int_via_fp32"]["aten::mm"] == 2


def test_float64_and_fp8_reported(check_run):
    result, _ = check_run
    # moving 1/3 onto the device already rounds it (Trainium holds float64 as float32), and the mul again
    assert 0 < _site(result, "float64", "float64", "aten::_to_copy")["worst"] < 1e-7
    assert 0 < _site(result, "float64", "float64", "aten::mul")["worst"] < 1e-7
    fp8 = _site(result, "fp8", "fp8")
    assert fp8["op"] == "aten::_to_copy" and fp8["worst"] == 448.0 and "+-240" in fp8["message"]


def test_report_lists_every_site(check_run):
    result, stderr = check_run
    assert len(result["findings"]) == 13  # 9 + two Python int scalars + two coalesced collectives
    text = result["report"]
    assert "TORCH_NEURONX_NUMERICS=check): 13 site(s)" in text
    assert f"<string>:{result['line']['int_mm']}: aten::mm x1, worst 67141636" in text
    # the same report is printed at exit
    assert "torch-neuronx numerics report" in stderr and "aten::index_add_" in stderr
