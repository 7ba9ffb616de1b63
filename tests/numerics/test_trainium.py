"""TORCH_NEURONX_NUMERICS=trainium: results computed as Trainium computes them, in
eager and compiled graphs alike; an op the emulation cannot express warns once."""
import pytest

from .helpers import run_mode

TRAINIUM = r'''
import warnings
import torch, torch_neuronx
from torch_neuronx import numerics
from torch_neuronx.compiler import _cache as cache
r = {}
N = "neuron"
# 1. int64 computed in 32 bits (wrap-around), returned as int64
big = torch.tensor([2**31 - 1, 2**40 + 5, -3, 7])
y = big.to(N) + 1
r["int64_dtype"] = str(y.dtype)
r["int64"] = y.cpu().tolist()
r["int64_expect"] = (big.to(torch.int32) + 1).to(torch.int64).tolist()
r["int64_prod"] = (torch.tensor([70000], device=N) * 70000).cpu().tolist()
r["int64_inplace"] = torch.tensor([2**31 - 1], device=N).add_(1).cpu().tolist()
# a Python int beyond 32 bits is downcast with the op (2**40 + 3 wraps to 3)
r["int64_scalar"] = [(torch.tensor([5, 2], device=N) < 2**40 + 3).cpu().tolist(),
                     (torch.tensor([5], device=N) + (2**40 + 3)).cpu().tolist()]
# 2. integer matmul, scatter_add, index_add through float32
a = torch.randint(-4000, 4000, (6, 5), dtype=torch.int32, generator=torch.Generator().manual_seed(0))
b = torch.randint(-4000, 4000, (5, 7), dtype=torch.int32, generator=torch.Generator().manual_seed(1))
r["mm_equal_fp32"] = torch.equal((a.to(N) @ b.to(N)).cpu(), (a.float() @ b.float()).to(torch.int32))
r["mm_differs_from_host"] = not torch.equal((a.to(N) @ b.to(N)).cpu(), a @ b)
r["index_add"] = torch.zeros(2, dtype=torch.int64, device=N).index_add_(
    0, torch.tensor([0, 0], device=N), torch.tensor([2**24, 1], device=N)).cpu().tolist()
r["scatter_add"] = torch.zeros(1, 1, dtype=torch.int32, device=N).scatter_add(
    1, torch.zeros(1, 2, dtype=torch.int64, device=N), torch.tensor([[2**24, 1]], dtype=torch.int32, device=N)).cpu().tolist()
# 3. float64 computed as float32, stored as float64
d = torch.tensor([1 / 3, 1e-10, 2.0], dtype=torch.float64)
e = d.to(N) * 3
r["f64_dtype"] = str(e.dtype)
r["f64_equal_fp32"] = torch.equal(e.cpu(), (d.float() * 3).double())
s = torch.tensor([1.0] + [1e-8] * 1000, dtype=torch.float64)
r["f64_sum"] = [s.to(N).sum().item(), s.float().sum().item(), s.sum().item()]
# 5. fp8 e4m3 beyond +-240
q = torch.tensor([100., 239., 240., 247., 248., 300., -448., float("nan")]).to(N).to(torch.float8_e4m3fn)
r["fp8"] = [str(v) for v in q.float().cpu().tolist()]
# 6. a compiled graph equals eager in the same mode, and the cache key has the mode
def f(x, w, d):
    i = (x * 3 + 2**31 - 10).sum()
    m = w @ w
    return i, m, (d * 7).sum(), x.cumsum(0)
x = torch.arange(8, device=N)
w = torch.full((3, 3), 4097, dtype=torch.int32, device=N)
eager = f(x, w, d.to(N))
comp = torch.compile(f, backend="neuron")(x, w, d.to(N))
r["compiled_equal"] = [bool(torch.equal(u.cpu(), v.cpu())) for u, v in zip(eager, comp)]
r["compiled_int64"] = comp[0].item()
r["compiled_mm"] = comp[1][0, 0].item()
r["key_fields"] = list(numerics.key_fields())
# integer all-reduce / reduce-scatter through float32 (a one-rank group: no extra processes)
import tempfile, torch.distributed as dist
dist.init_process_group("neuron", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
c = torch.tensor([2**24 + 1, 3], device=N)
dist.all_reduce(c)
avg = torch.tensor([7, 2**25 + 3], device=N)
dist.all_reduce(avg, op=dist.ReduceOp.AVG)
rs = torch.zeros(1, dtype=torch.int32, device=N)
dist.reduce_scatter_tensor(rs, torch.tensor([2**24 + 1], dtype=torch.int32, device=N))
fl = torch.tensor([2.0**24 + 1], dtype=torch.float32, device=N)
dist.all_reduce(fl)
r["collectives"] = [c.cpu().tolist(), avg.cpu().tolist(), rs.cpu().tolist(), fl.item()]
cc = [torch.tensor([2**24 + 1], device=N), torch.tensor([5, 2**24 + 3], device=N)]
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # all_reduce_coalesced is deprecated, still called by libraries
    dist.all_reduce_coalesced(cc)
o1, o2 = torch.zeros(1, dtype=torch.int32, device=N), torch.zeros(1, dtype=torch.int64, device=N)
with dist._coalescing_manager():  # one reduce_scatter_tensor_coalesced call on the group
    dist.reduce_scatter_tensor(o1, torch.tensor([2**24 + 1], dtype=torch.int32, device=N))
    dist.reduce_scatter_tensor(o2, torch.tensor([2**24 + 3], device=N))
r["coalesced"] = [[t.cpu().tolist() for t in cc], o1.item(), o2.item()]
dist.destroy_process_group()
# Bad input: an op the emulation cannot express keeps host numerics, with one warning naming it
i8 = torch.ones(32, 32, dtype=torch.int8, device=N)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    o1 = torch._int_mm(i8, i8)
    o2 = torch._int_mm(i8, i8)
r["int_mm"] = o1[0, 0].item()
r["warnings"] = [str(w.message) for w in caught if "cannot be emulated" in str(w.message)]
result = r
'''


@pytest.fixture(scope="module")
def trainium_run():
    return run_mode(TRAINIUM, {"TORCH_NEURONX_NUMERICS": "trainium"})[0]


def test_int64_computed_in_32_bits(trainium_run):
    r = trainium_run
    assert r["int64_dtype"] == "torch.int64"
    assert r["int64"] == r["int64_expect"] == [-2**31, 6, -2, 8]
    assert r["int64_prod"] == [(70000 * 70000 + 2**31) % 2**32 - 2**31]
    assert r["int64_inplace"] == [-2**31]
    assert r["int64_scalar"] == [[False, True], [8]]


def test_integer_ops_through_fp32(trainium_run):
    r = trainium_run
    assert r["mm_equal_fp32"] and r["mm_differs_from_host"]
    assert r["index_add"] == [2**24, 0]           # 2^24 + 1 is not a float32
    assert r["scatter_add"] == [[2**24]]


def test_integer_collectives_through_fp32(trainium_run):
    all_reduce, avg, reduce_scatter, floats = trainium_run["collectives"]
    assert all_reduce == [2**24, 3]              # host: 2^24 + 1
    assert avg == [7, 2**25 + 4]
    assert reduce_scatter == [2**24]
    assert floats == 2.0**24                     # float32 tensors: float32 as always
    assert trainium_run["coalesced"] == [[[2**24], [5, 2**24 + 4]], 2**24, 2**24 + 4]  # *_coalesced alike


def test_float64_as_float32(trainium_run):
    r = trainium_run
    assert r["f64_dtype"] == "torch.float64" and r["f64_equal_fp32"]
    on_neuron, fp32, fp64 = r["f64_sum"]
    assert on_neuron == fp32 != fp64


def test_fp8_beyond_240_is_nan(trainium_run):
    assert trainium_run["fp8"] == ["96.0", "240.0", "240.0", "240.0", "nan", "nan", "nan", "nan"]


def test_compiled_equals_eager(trainium_run):
    r = trainium_run
    assert r["compiled_equal"] == [True, True, True, True]
    exact = sum(3 * v + 2**31 - 10 for v in range(8))
    assert r["compiled_int64"] == (exact + 2**31) % 2**32 - 2**31  # wrapped, as in eager
    assert r["compiled_mm"] == 50356224 != 3 * 4097 * 4097  # float32: 4097^2 rounds to 16785408
    assert r["key_fields"][:2] == ["numerics", "trainium"]


def test_unexpressible_op_warns_once_and_uses_host(trainium_run):
    r = trainium_run
    assert r["int_mm"] == 32
    assert len(r["warnings"]) == 1 and "aten::_int_mm" in r["warnings"][0]
    assert "host numerics" in r["warnings"][0]
