"""The element-wise operator table: ``nl.add``, ``nl.exp``, ... as :class:`Op` objects.

An Op is both the ``op=`` of nki.isa instructions (which read its numpy function and flags)
and, through nki.language, a high-level function returning a new SBUF tile. The table lives
here, below both, so nki.isa never imports nki.language; the language registers what calling
an Op (and a tensor's Python operators) does with :func:`register_language`.
"""
from __future__ import annotations

import numpy as np

_REGISTRY: dict[str, "Op"] = {}
# What nki.language registers: "unary", "binary" (an Op called on tiles), "copy" (nl.copy(x))
# and "assign" (``t[idx] = value``). They are language functions one layer up.
_LANGUAGE: dict = {}


def register_language(**functions) -> None:
    """Called by nki.language on import with the high-level functions behind Ops and tensors."""
    _LANGUAGE.update(functions)


def language(name: str):
    """The registered language function ``name``, with what to do when there is none."""
    try:
        return _LANGUAGE[name]
    except KeyError:
        raise RuntimeError("NKI operators on tensors (nl.add(a, b), a + b, t[i] = v) are "
                           "nki.language functions: import nki.language first") from None


def _erf(x):
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), odd-symmetric
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
               + 0.254829592) * t * np.exp(-a * a)
    return (s * y).astype(np.float32)


def _sigmoid(x):
    return (1.0 / (1.0 + np.exp(-x))).astype(np.float32)


def _gelu(x):
    return (0.5 * x * (1.0 + _erf(x / np.sqrt(2.0)))).astype(np.float32)


def _gelu_tanh(x):
    return (0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))).astype(np.float32)


def _gelu_dx(x):
    return (0.5 * (1.0 + _erf(x / np.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)
            ).astype(np.float32)


def _softplus(x):
    return np.logaddexp(np.float32(0), x).astype(np.float32)


def _i(a):
    return np.asarray(a).astype(np.int64)


def _f01(b):
    return np.asarray(b, dtype=np.float32)


def _reducer(ufunc):
    def r(a, axes):
        return ufunc.reduce(a, axis=tuple(axes), keepdims=True)
    return r


class Op:
    """An element-wise operator (``nl.add``, ``nl.exp``, ...)."""

    def __init__(self, name, fn, arity, *, alu=False, act=False, cmp=False, gpsimd=False,
                 int_ok=False, reduce=None, vector_unary=False, doc=""):
        self.name = name
        self.fn = fn
        self.arity = arity
        self.alu = alu
        self.act = act
        self.cmp = cmp
        self.gpsimd = gpsimd
        self.int_ok = int_ok
        self.reduce = reduce
        self.vector_unary = vector_unary
        self.__doc__ = doc or f"nl.{name}: element-wise {name}."
        self.__name__ = name
        _REGISTRY[name] = self

    def __repr__(self):
        return f"nl.{self.name}"

    def __call__(self, *args, dtype=None, out=None, **kw):
        if self.arity == 1:
            if len(args) != 1:
                raise TypeError(f"nl.{self.name} takes one operand")
            return language("unary")(self, args[0], dtype, out)
        if len(args) != 2:
            raise TypeError(f"nl.{self.name} takes two operands")
        return language("binary")(self, args[0], args[1], dtype, out)


def as_op(op):
    """Resolve an op given as an Op, a reduction function (nl.sum, nl.max) or a name."""
    if isinstance(op, Op):
        return op
    alu = getattr(op, "alu", None)
    if isinstance(alu, Op):
        return alu
    if isinstance(op, str):
        return _REGISTRY.get(op)
    return None


# ---------------------------------------------------------------- binary ALU ops
def _bin(name, fn, reduce=None, **kw):
    return Op(name, fn, 2, alu=True, reduce=reduce, **kw)


def _absmax_reduce(a, axes):
    return np.max(np.abs(a), axis=tuple(axes), keepdims=True)


def _absmin_reduce(a, axes):
    return np.min(np.abs(a), axis=tuple(axes), keepdims=True)


def _divide(a, b):
    if np.asarray(a).dtype.kind in "iu" and np.asarray(b).dtype.kind in "iu":
        return np.trunc(a / np.where(b == 0, 1, b)).astype(np.int64)
    return np.divide(a, b)


add = _bin("add", np.add, _reducer(np.add), int_ok=True)
subtract = _bin("subtract", np.subtract, int_ok=True)
multiply = _bin("multiply", np.multiply, _reducer(np.multiply), int_ok=True)
divide = _bin("divide", _divide, int_ok=True)
maximum = _bin("maximum", np.maximum, _reducer(np.maximum), int_ok=True)
minimum = _bin("minimum", np.minimum, _reducer(np.minimum), int_ok=True)
abs_max = _bin("abs_max", lambda a, b: np.maximum(np.abs(a), np.abs(b)), _absmax_reduce)
abs_min = _bin("abs_min", lambda a, b: np.minimum(np.abs(a), np.abs(b)), _absmin_reduce)
power = _bin("power", lambda a, b: np.power(np.asarray(a, np.float32), b), gpsimd=True)
fmod = _bin("fmod", np.fmod, int_ok=True)
mod = _bin("mod", np.mod, int_ok=True)
equal = _bin("equal", lambda a, b: _f01(a == b), cmp=True, int_ok=True)
not_equal = _bin("not_equal", lambda a, b: _f01(a != b), cmp=True, int_ok=True)
less = _bin("less", lambda a, b: _f01(a < b), cmp=True, int_ok=True)
less_equal = _bin("less_equal", lambda a, b: _f01(a <= b), cmp=True, int_ok=True)
greater = _bin("greater", lambda a, b: _f01(a > b), cmp=True, int_ok=True)
greater_equal = _bin("greater_equal", lambda a, b: _f01(a >= b), cmp=True, int_ok=True)
logical_and = _bin("logical_and", lambda a, b: _f01((a != 0) & (b != 0)),
                   lambda a, ax: _f01(np.all(a != 0, axis=tuple(ax), keepdims=True)), int_ok=True)
logical_or = _bin("logical_or", lambda a, b: _f01((a != 0) | (b != 0)),
                  lambda a, ax: _f01(np.any(a != 0, axis=tuple(ax), keepdims=True)), int_ok=True)
logical_xor = _bin("logical_xor", lambda a, b: _f01((a != 0) ^ (b != 0)), int_ok=True)
bitwise_and = _bin("bitwise_and", lambda a, b: _i(a) & _i(b),
                   lambda a, ax: np.bitwise_and.reduce(_i(a), axis=tuple(ax), keepdims=True),
                   int_ok=True)
bitwise_or = _bin("bitwise_or", lambda a, b: _i(a) | _i(b),
                  lambda a, ax: np.bitwise_or.reduce(_i(a), axis=tuple(ax), keepdims=True),
                  int_ok=True)
bitwise_xor = _bin("bitwise_xor", lambda a, b: _i(a) ^ _i(b),
                   lambda a, ax: np.bitwise_xor.reduce(_i(a), axis=tuple(ax), keepdims=True),
                   int_ok=True)
left_shift = _bin("left_shift", lambda a, b: _i(a) << _i(b), int_ok=True)
right_shift = _bin("right_shift", lambda a, b: _i(a) >> _i(b), int_ok=True)


# ------------------------------------------------------- unary activation functions
def _act(name, fn, **kw):
    return Op(name, lambda x: np.asarray(fn(np.asarray(x, np.float32)), np.float32), 1, act=True, **kw)


exp = _act("exp", np.exp)
log = _act("log", np.log)
sqrt = _act("sqrt", np.sqrt)
rsqrt = _act("rsqrt", lambda x: 1.0 / np.sqrt(x), gpsimd=True)
reciprocal = _act("reciprocal", lambda x: 1.0 / x, vector_unary=True)
tanh = _act("tanh", np.tanh)
sigmoid = _act("sigmoid", _sigmoid)
relu = _act("relu", lambda x: np.maximum(x, 0))
gelu = _act("gelu", _gelu)
gelu_apprx_tanh = _act("gelu_apprx_tanh", _gelu_tanh)
gelu_apprx_sigmoid = _act("gelu_apprx_sigmoid", lambda x: x * _sigmoid(1.702 * x))
gelu_dx = _act("gelu_dx", _gelu_dx)
silu = _act("silu", lambda x: x * _sigmoid(x))
silu_dx = _act("silu_dx", lambda x: _sigmoid(x) * (1 + x * (1 - _sigmoid(x))))
softplus = _act("softplus", _softplus)
mish = _act("mish", lambda x: x * np.tanh(_softplus(x)))
erf = _act("erf", _erf)
erf_dx = _act("erf_dx", lambda x: 2.0 / np.sqrt(np.pi) * np.exp(-x * x))
sin = _act("sin", np.sin)
cos = _act("cos", np.cos)
tan = _act("tan", np.tan)
arctan = _act("arctan", np.arctan)
square = _act("square", np.square)
abs = _act("abs", np.abs)  # noqa: A001
sign = _act("sign", np.sign)
negative = _act("negative", np.negative)
identity = _act("identity", lambda x: x)
ceil = Op("ceil", np.ceil, 1, vector_unary=True)
floor = Op("floor", np.floor, 1, vector_unary=True)
trunc = Op("trunc", np.trunc, 1, vector_unary=True)
logical_not = Op("logical_not", lambda a: _f01(a == 0), 1, vector_unary=True, int_ok=True)
invert = Op("invert", lambda a: ~_i(a), 1, vector_unary=True, int_ok=True)
bitwise_not = invert




class _CopyOp(Op):
    """nl.copy: identity activation for nisa.activation, and ``nl.copy(x)`` -> new SBUF tile."""

    def __call__(self, x, dtype=None, **kw):
        return language("copy")(x, dtype=dtype)


copy = _CopyOp("copy", lambda x: np.asarray(x, np.float32), 1, act=True)
