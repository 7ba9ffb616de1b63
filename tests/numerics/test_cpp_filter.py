"""The C++ pre-filter (csrc/numerics_filter.cpp) in front of the numerics mode: every
op the mode would check reaches Python, ops of other dtypes do not, and the
findings are those of the same mode pushed as a plain Python dispatch mode.

These run in the (host-mode) test process: the filter is enabled around each
workload and disabled after, as the benchmark does."""
import pytest
import torch

from torch_neuronx import numerics
from torch_neuronx.numerics import cpp_filter, float64, fp8, int64, int_via_fp32
from torch_neuronx.numerics.config import NumericsConfig
from torch_neuronx.numerics.dispatch_mode import NumericsMode

N = "neuron"
# Every dtype a report class looks at (the modules' own lists, so a class added there is covered).
CHECKED = sorted(set(int64.DTYPES + float64.DTYPES + fp8.DTYPES + int_via_fp32.INT_DTYPES), key=str)
UNCHECKED = [torch.float32, torch.bfloat16, torch.float16, torch.bool, torch.complex64]


class Recording(NumericsMode):
    """The numerics mode, noting each op the filter hands over (and by which door)."""

    def __init__(self, config):
        super().__init__(config)
        self.calls = []

    def dispatch(self, func, args, kwargs):
        self.calls.append(("dispatch", func._schema.name))
        return super().dispatch(func, args, kwargs)

    def produced(self, func, args, kwargs, out):
        self.calls.append(("produced", func._schema.name))
        return super().produced(func, args, kwargs, out)


@pytest.fixture(autouse=True)
def clean_report():
    numerics.reset_findings()
    yield
    assert not cpp_filter.active()
    numerics.reset_findings()


def _routed(mode, fn):
    with cpp_filter.filtering(mode):
        mode.calls.clear()
        fn()
        return list(mode.calls)


def test_host_process_has_no_filter():
    assert numerics.mode() == "host" and not cpp_filter.active()


@pytest.mark.parametrize("dtype", CHECKED, ids=str)
def test_each_checked_dtype_reaches_python(dtype):
    t = torch.zeros(3, dtype=dtype).to(N)
    mode = Recording(NumericsConfig(mode="check"))
    assert ("dispatch", "aten::clone") in _routed(mode, lambda: t.clone())
    # a dtype argument alone (float32 input, watched result dtype) is enough
    src = torch.zeros(3, device=N)
    assert ("dispatch", "aten::_to_copy") in _routed(mode, lambda: src.to(dtype))


@pytest.mark.parametrize("dtype", UNCHECKED, ids=str)
def test_other_dtypes_stay_in_cpp(dtype):
    t = torch.ones(4, dtype=dtype).to(N)
    mode = Recording(NumericsConfig(mode="check"))
    assert _routed(mode, lambda: (t.clone(), t * t if dtype != torch.bool else t & t, t.view(2, 2))) == []


def test_watched_results_of_unwatched_inputs_reach_python():
    x = torch.randn(4, 5, device=N)
    mode = Recording(NumericsConfig(mode="check"))
    calls = _routed(mode, lambda: (x.argmax(), torch.arange(3, device=N), x.to(torch.float64)))
    assert ("produced", "aten::argmax") in calls and ("produced", "aten::arange") in calls
    assert ("dispatch", "aten::_to_copy") in calls


def test_stochastic_rounding_watches_low_precision():
    t = torch.ones(4, dtype=torch.bfloat16, device=N)
    sr = Recording(NumericsConfig(mode="trainium", stochastic_rounding=True))
    assert ("dispatch", "aten::mul") in _routed(sr, lambda: t * 3)
    assert _routed(Recording(NumericsConfig(mode="trainium")), lambda: t * 3) == []


def _workload():
    """One line per report class (and the scalar path), each lossy on Trainium."""
    big = torch.tensor([2**31 - 1, 5]).to(N)
    big + 1                                                                      # int64 from int64
    torch.arange(2**31, 2**31 + 2, device=N)                                     # int64 from a factory
    torch.tensor([3], device=N) < 2**40                                          # Python int beyond 32 bits
    torch.tensor([2**33], dtype=torch.uint64).to(N)                              # uint64
    a = torch.full((2, 2), 4097, dtype=torch.int32, device=N)
    a @ a                                                                        # int32 matmul via fp32
    torch.zeros(2, dtype=torch.int64, device=N).index_add_(
        0, torch.tensor([0, 0], device=N), torch.tensor([2**24, 1], device=N))   # index_add via fp32
    torch.tensor([1 / 3], dtype=torch.float64).to(N) * 0.1                       # float64
    torch.tensor([1 / 3 + 1j], dtype=torch.complex128).to(N) * 0.1               # complex128
    torch.tensor([300.0], device=N).to(torch.float8_e4m3fn)                      # fp8 beyond +-240
    torch.randn(3, 3, device=N).softmax(-1).sum()                                # float32: nothing


def _findings(run):
    numerics.reset_findings()
    run()
    out = sorted((f["kind"], f["op"], f["site"], f["count"], f["worst"], f["detail"]) for f in numerics.findings())
    return out, numerics.exposure()


def test_findings_match_the_python_mode():
    mode = NumericsMode(NumericsConfig(mode="check"))

    def filtered():
        with cpp_filter.filtering(mode):
            _workload()

    def python_mode():
        with mode:
            _workload()

    via_filter, exposure = _findings(filtered)
    via_mode, mode_exposure = _findings(python_mode)
    assert via_filter == via_mode and exposure == mode_exposure
    kinds = {(kind, detail.split(" ")[0]) for kind, _, _, _, _, detail in via_filter}
    assert {("int64", "torch.int64"), ("int64", "Python"), ("int64", "torch.uint64"), ("int_via_fp32", "torch.int32"),
            ("int_via_fp32", "torch.int64"), ("float64", "max"), ("fp8", "torch.float8_e4m3fn")} <= kinds, via_filter
    assert {op for _, op, *_ in via_filter} >= {"aten::add", "aten::lt", "aten::arange", "aten::mm", "aten::index_add_",
                                                 "aten::mul", "aten::_to_copy"}


def test_errors_from_python_reach_the_caller():
    mode = NumericsMode(NumericsConfig(mode="trainium", float64="raise"))
    x = torch.ones(2, dtype=torch.float64).to(N)
    with cpp_filter.filtering(mode):
        with pytest.raises(float64.NumericsUnsupportedError, match="aten::mul computes in float64"):
            x * 2
    assert x.cpu().tolist() == [1.0, 1.0]


def test_no_dispatch_turns_the_filter_off_like_a_mode():
    from torch.utils._mode_utils import no_dispatch

    x = torch.ones(2, dtype=torch.int64, device=N)
    mode = Recording(NumericsConfig(mode="check"))

    def run():
        with no_dispatch():
            x + 1
    assert _routed(mode, run) == []
