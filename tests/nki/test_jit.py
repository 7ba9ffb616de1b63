"""nki.jit: specialisation cache, grid launch, NKI_SIMULATOR, framework handlers, tracing."""
import numpy as np
import pytest

import nki
import nki.language as nl


@nki.jit
def scale_add(a, b, alpha=1.0):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.multiply(nl.load(a), alpha), nl.load(b)))
    return out


def test_call_runs_on_simulator(rng):
    a, b = rng.standard_normal((2, 16, 32), dtype=np.float32)
    np.testing.assert_allclose(scale_add(a, b, alpha=3.0), 3 * a + b, rtol=1e-6)
    assert isinstance(scale_add, nki.Kernel)
    assert scale_add.__name__ == "scale_add"


def test_cache_per_shapes_dtypes_and_constants(rng):
    k = nki.jit(scale_add.fn)
    a, b = rng.standard_normal((2, 16, 32), dtype=np.float32)
    k(a, b)
    k(a + 1, b)                              # same shapes/dtypes/constants: hit
    assert k.cache_info() == (1, 1, 1)
    k(a, b, alpha=2.0)                       # new constant: miss
    k(a[:8], b[:8])                          # new shape: miss
    k(a.astype(np.float16), b.astype(np.float16))   # new dtype: miss
    assert k.cache_info() == (1, 4, 4)


def test_grid_launch_program_id():
    @nki.jit
    def k(a):
        out = nl.ndarray((nl.num_programs(0), nl.num_programs(1)), nl.int32, buffer=nl.shared_hbm)
        i, j = nl.program_id(0), nl.program_id(1)
        t = nl.full((1, 1), i * 10 + j + nl.program_ndim() * 100, nl.int32)
        nl.store(out[i:i + 1, j:j + 1], t)
        return out
    out = k[3, 2](np.zeros((1, 1), np.float32))
    np.testing.assert_array_equal(out, [[200, 201], [210, 211], [220, 221]])


def test_lnc_launch_one_dimensional():
    @nki.jit
    def k(a):
        out = nl.ndarray((1, nl.num_programs()), nl.float32, buffer=nl.shared_hbm)
        p = nl.program_id(0)
        nl.store(out[0:1, p:p + 1], nl.full((1, 1), float(p + 1), nl.float32))
        return out
    np.testing.assert_array_equal(k[2](np.zeros(1, np.float32)), [[1.0, 2.0]])
    np.testing.assert_array_equal(k[1](np.zeros(1, np.float32)), [[1.0]])


def test_simulate_wraps_plain_functions_and_reports(rng):
    a, b = rng.standard_normal((2, 8, 8), dtype=np.float32)
    sim = nki.simulate(scale_add.fn, target="trn3")
    np.testing.assert_allclose(sim(a, b), a + b)
    assert sim.report is nki.last_run()
    assert sim.report.target == "trn3" and sim.report.total_ns > 0
    res = sim.run(a, b)
    assert res.report.instructions >= 4 and res.mutated == ()


class _Marker:
    def __init__(self, arr):
        self.arr = arr

    def __array__(self, dtype=None, copy=None):
        return self.arr


def test_framework_handler_and_env_override(monkeypatch, rng):
    calls = []

    def handler(kernel, grid, args, kwargs):
        calls.append(kernel)
        return "handled"
    nki.register_framework_handler(lambda x: isinstance(x, _Marker), handler)
    try:
        a = rng.standard_normal((4, 4), dtype=np.float32)
        assert scale_add(_Marker(a), _Marker(a)) == "handled"
        monkeypatch.setenv("NKI_SIMULATOR", "1")      # forces the simulator, bypassing handlers
        np.testing.assert_allclose(scale_add(_Marker(a), _Marker(a)), 2 * a)
        assert len(calls) == 1
    finally:
        nki.unregister_framework_handler(handler)


def test_nested_kernel_call_is_inlined(rng):
    @nki.jit
    def inner(t):
        return nl.exp(t)

    @nki.jit
    def outer(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, inner(nl.load(a)))
        return out
    a = rng.standard_normal((4, 4), dtype=np.float32)
    np.testing.assert_allclose(outer(a), np.exp(a), rtol=1e-6)


class _Meta:
    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype


def test_output_specs_trace_without_data():
    @nki.jit
    def k(a, b):
        o1 = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.shared_hbm)
        o2 = nl.ndarray((a.shape[0], 1), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        nl.store(o1, nl.add(t, nl.load(b), dtype=nl.bfloat16))
        nl.store(o2, nl.sum(t, axis=1))
        return o1, o2
    specs = k.output_specs(_Meta((64, 32), "float32"), _Meta((64, 32), "float32"))
    assert [(s.shape, s.dtype) for s in specs] == [((64, 32), nl.bfloat16), ((64, 1), nl.float32)]
    specs2 = k.output_specs(_Meta((64, 32), "float32"), _Meta((64, 32), "float32"))
    assert specs2 == specs and k.cache_info()[0] >= 1


def test_signature_rules(expect_code):
    def lists(a, dims):
        return None
    expect_code("err_unsupported_argument_type", lists, np.zeros(2, np.float32), [1, 2])
    nki.simulate(lists)(np.zeros(2, np.float32), (1, 2))     # tuples are fine

    def star(a, *rest):
        return None
    expect_code("err_unsupported_argument_type", star, np.zeros(2, np.float32))


def test_api_outside_kernel():
    with pytest.raises(nki.NkiValidationError) as ei:
        nl.ndarray((4, 4), nl.float32)
    assert ei.value.code == "err_nki_api_outside_of_nki_kernel"
    with pytest.raises(nki.NkiValidationError):
        nl.program_id(0)


def test_legacy_aliases(rng):
    a, b = rng.standard_normal((2, 4, 4), dtype=np.float32)
    np.testing.assert_allclose(nki.baremetal(scale_add)(a, b), a + b)
    assert nki.jit(mode="simulation")(scale_add.fn)(a, b).shape == (4, 4)


def test_kernel_level_shared_hbm(expect_code):
    A = np.zeros((4, 4), np.float32)

    def in_loop(a):
        for i in range(2):
            out = nl.ndarray((4, 4), nl.float32, buffer=nl.shared_hbm)
        return out
    expect_code("err_shared_hbm_must_in_kernel_level", in_loop, A)

    def in_branch(a):
        if a.shape[0] == 4:
            out = nl.ndarray((4, 4), nl.float32, buffer=nl.shared_hbm)
        return out
    expect_code("err_shared_hbm_must_in_kernel_level", in_branch, A)

    def helper():
        return nl.ndarray((4, 4), nl.float32, buffer=nl.shared_hbm)

    def in_subfunction(a):
        return helper()
    expect_code("err_shared_hbm_must_in_kernel_level", in_subfunction, A)
