"""Scalar engine: activation(op(data * scale + bias)), accumulate registers, bias/scale rules."""
import numpy as np
import pytest

import nki
import nki.isa as nisa
import nki.language as nl


def test_activation_bias_scale(rng):
    a = rng.standard_normal((32, 64), dtype=np.float32)
    b = rng.standard_normal((32, 1), dtype=np.float32)
    s = rng.uniform(0.5, 2, (32, 1)).astype(np.float32)

    def k(a, b, s):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        out2 = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        d = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.activation(d, op=nl.exp, data=t, bias=nl.load(b), scale=nl.load(s))
        nl.store(out, d)
        d2 = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.activation(d2, op=nl.gelu, data=t, scale=0.5)
        nl.store(out2, d2)
        return out, out2
    o1, o2 = nki.simulate(k)(a, b, s)
    np.testing.assert_allclose(o1, np.exp(a * s + b), rtol=1e-5)
    from math import erf
    ref = np.vectorize(lambda x: 0.5 * x * (1 + erf(x / np.sqrt(2))))(0.5 * a)
    np.testing.assert_allclose(o2, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op,ref", [
    (nl.relu, lambda x: np.maximum(x, 0)), (nl.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    (nl.tanh, np.tanh), (nl.silu, lambda x: x / (1 + np.exp(-x))), (nl.square, np.square),
    (nl.copy, lambda x: x), (nl.softplus, lambda x: np.log1p(np.exp(x))),
    (nl.gelu_apprx_tanh, lambda x: 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))),
])
def test_activation_functions(op, ref, rng):
    a = rng.standard_normal((16, 32), dtype=np.float32)

    def k(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        d = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.activation(d, op=op, data=nl.load(a))
        nl.store(out, d)
        return out
    np.testing.assert_allclose(nki.simulate(k)(a), ref(a), rtol=1e-5, atol=1e-6)


def test_accumulate_registers_persist_across_instructions(rng):
    a = rng.standard_normal((16, 3, 32), dtype=np.float32)
    RC = nisa.reduce_cmd

    def k(a):
        out = nl.ndarray((16, 3), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        res = nl.ndarray((16, 3), nl.float32, buffer=nl.sbuf)
        d = nl.ndarray((16, 32), nl.float32, buffer=nl.sbuf)
        nisa.activation(d, nl.exp, t[:, 0, :], reduce_op=nl.add, reduce_cmd=RC.reset_reduce)
        nisa.activation(d, nl.exp, t[:, 1, :], reduce_op=nl.add, reduce_cmd=RC.reduce,
                        reduce_res=res[:, 0:1])           # sum over two instructions
        nisa.activation(d, nl.exp, t[:, 2, :], reduce_op=nl.maximum,
                        reduce_res=res[:, 1:2])           # idle + reduce_res -> reset_reduce
        nisa.activation(d, nl.copy, t[:, 2, :], reduce_op=nl.add, reduce_cmd=RC.load_reduce,
                        reduce_res=res[:, 2:3])           # starts from reduce_res' (NaN) value
        nl.store(out, res)
        return out
    out = nki.simulate(k)(a)
    e = np.exp(a)
    np.testing.assert_allclose(out[:, 0], e[:, 0].sum(1) + e[:, 1].sum(1), rtol=1e-5)
    np.testing.assert_allclose(out[:, 1], e[:, 2].max(1), rtol=1e-6)
    assert np.isnan(out[:, 2]).all()          # loaded from never-written memory


def test_activation_reduce(rng):
    a = rng.standard_normal((8, 40), dtype=np.float32)

    def k(a):
        out = nl.ndarray((8, 1), nl.float32, buffer=nl.shared_hbm)
        d = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((8, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(d, nl.square, nl.load(a), reduce_op=nl.add, reduce_res=r)
        nl.store(out, r)
        return out
    np.testing.assert_allclose(nki.simulate(k)(a)[:, 0], (a * a).sum(1), rtol=1e-5)


def _act_with(bias=None, scale=1.0, op=nl.exp):
    def k(a):
        d = nl.ndarray((32, 8), nl.float32, buffer=nl.sbuf)
        nisa.activation(d, op=op, data=d, bias=bias() if callable(bias) else bias,
                        scale=scale() if callable(scale) else scale)
    return k


@pytest.mark.parametrize("kw,code", [
    (dict(bias=lambda: nl.ndarray((32, 2), nl.float32, buffer=nl.sbuf)),
     "err_activation_bias_invalid_type"),
    (dict(bias=lambda: nl.ndarray((32, 1), nl.int32, buffer=nl.sbuf)),
     "err_activation_bias_invalid_type"),
    (dict(bias=1.0), "err_activation_bias_invalid_type"),
    (dict(bias=lambda: nl.ndarray((16, 1), nl.float32, buffer=nl.sbuf)),
     "err_num_partition_mismatch"),
    (dict(scale=lambda: nl.ndarray((32, 1), nl.bfloat16, buffer=nl.sbuf)),
     "err_activation_scale_invalid_type"),
    (dict(scale="2"), "err_activation_scale_invalid_type"),
    (dict(scale=lambda: nl.ndarray((32, 4), nl.float32, buffer=nl.sbuf)),
     "err_activation_scale_scalar_or_vector"),
    (dict(op=nl.add), "err_unsupported_op"),
])
def test_bias_scale_op_rules(kw, code, expect_code):
    expect_code(code, _act_with(**kw), np.zeros(1, np.float32))
