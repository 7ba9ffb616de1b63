"""The dispatch mode that `check` and `trainium` install at startup.

It sits below autograd, so it sees every ATen op on neuron tensors, forward
and backward, explicit kernels included, and the ops of compiled graphs
(the backend runs them op by op in these modes: compiler/_backend.py). Ops
without a neuron tensor of an affected dtype pass straight through. Host mode
installs nothing.

At startup it is not pushed as a Python mode but handed to the C++ filter
(cpp_filter.py, csrc/numerics_filter.cpp), which calls `dispatch`/`produced` only for
the ops that could differ; pushed as a mode it behaves the same, at ~2x the cost.
"""
from __future__ import annotations

import warnings

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .._torch_versions import require
from ..estimate.aten_schema import is_view
from . import fp8, float64, int64, int_via_fp32, mx_matmul, recompute, report, stochastic_rounding
from .config import NumericsConfig

_INTERESTING = frozenset(int64.DTYPES + float64.DTYPES + fp8.DTYPES + int_via_fp32.INT_DTYPES)
_LOW = frozenset(stochastic_rounding.DTYPES)
# The torch minors whose Dynamo frame-skip API (set_code_exec_strategy, FrameExecStrategy) skip_dynamo was checked against.
SKIP_DYNAMO_WRITTEN_FOR = ("2.13", "2.14", "2.15")
# Results with no values yet: nothing to check or emulate.
_UNINITIALISED = frozenset({"aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty",
                            "aten::new_empty_strided", "aten::empty_permuted", "aten::resize_", "aten::set_"})


def _neuron_device(device) -> bool:
    return device is not None and torch.device(device).type == "neuron"


def _tensors(args, kwargs) -> list:
    tensors: list = []
    for a in args:
        _collect(a, tensors)
    for v in kwargs.values():
        _collect(v, tensors)
    return tensors


def _collect(value, into: list) -> None:
    if isinstance(value, torch.Tensor):
        into.append(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _collect(v, into)


class NumericsMode(TorchDispatchMode):
    """check: record where Trainium would differ; trainium: compute as Trainium does."""

    def __init__(self, config: NumericsConfig) -> None:
        super().__init__()
        self.config = config
        self.emulate = config.mode == "trainium"
        self.sr = stochastic_rounding.Rounder(config.stochastic_rounding_seed) \
            if self.emulate and config.stochastic_rounding else None
        self.watch = _INTERESTING | (_LOW if self.sr is not None else frozenset())
        self.int64_on = config.int64 == "wrap"
        self.fp8_on = fp8.target_has_neuron_e4m3()
        self._warned: set[str] = set()

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # PyTorch wraps __torch_dispatch__ in torch._dynamo.disable unless this is
        # False: that wrapper costs ~8 us per op. Instead `skip_dynamo()` marks this
        # frame and everything it calls as never traced, once, at install.
        return False

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True  # Dynamo still compiles; graphs run their ops through this mode

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return self.dispatch(func, args, kwargs or {})

    def _inputs_watched(self, args, kwargs) -> bool:
        # Almost every op of a float32/bf16 model has no argument of a watched
        # dtype. Kept to a few attribute reads per argument. The C++ filter
        # (csrc/numerics_filter.cpp) hands over a superset of the ops this accepts.
        watch = self.watch
        # CPU tensors (such as the float64 0-dim tensor a Python scalar becomes) do not count.
        for a in args:
            if isinstance(a, torch.Tensor):
                if a.dtype in watch and a.device.type == "neuron":
                    return True
            elif isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor):
                if any(isinstance(t, torch.Tensor) and t.dtype in watch and t.device.type == "neuron" for t in a):
                    return True
        return bool(kwargs) and (kwargs.get("dtype") in watch or any(
            isinstance(v, torch.Tensor) and v.dtype in watch and v.device.type == "neuron"
            for v in kwargs.values()))

    def dispatch(self, func, args, kwargs):
        """Run one op as Trainium would be checked/emulated: the mode's __torch_dispatch__,
        and what the C++ filter calls for an op with a watched neuron tensor or dtype argument."""
        if not self._inputs_watched(args, kwargs):
            return self.produced(func, args, kwargs, func(*args, **kwargs))
        if is_view(func) or func._schema.name in _UNINITIALISED:
            return func(*args, **kwargs)
        tensors = _tensors(args, kwargs)
        if not any(recompute.is_plain_neuron(t) for t in tensors) and not _neuron_device(kwargs.get("device")):
            return func(*args, **kwargs)  # CPU, meta or fake tensors: not ours
        if self.emulate and self.config.float64 == "raise" and float64.involved(
                [t for t in tensors if recompute.is_plain_neuron(t)], kwargs):
            float64.reject(func._schema.name)
        # Copies of mutated inputs are needed only by the checks and emulations that re-run the op.
        rerun = self.emulate or func._schema.name.split("::")[-1] in int_via_fp32.OPS or float64.involved(
            [t for t in tensors if recompute.is_plain_neuron(t)], kwargs)
        snapshot = recompute.snapshot_mutated(func, args, kwargs) if rerun else None
        if self.int64_on and int64.big_scalar(args, kwargs) is not None and any(
                t.dtype in int64.DTYPES for t in tensors if recompute.is_plain_neuron(t)):
            # A Python int beyond 32 bits with int64 operands (`t + 2**40`): Trainium downcasts it too.
            if self.emulate:
                args, kwargs = int64.wrap_scalars(args, kwargs)
            else:
                report.record("int64", func._schema.name, float(int64.big_scalar(args, kwargs)), "Python int scalar")
        out = func(*args, **kwargs)
        return self._after(func, args, kwargs, out, tensors, snapshot)

    def produced(self, func, args, kwargs, out):
        """An op without watched inputs has run; factories and ops such as argmax still
        produce a watched dtype from others (the C++ filter calls this for those)."""
        if (isinstance(out, torch.Tensor) and out.dtype in self.watch and recompute.is_plain_neuron(out)
                and func._schema.name not in _UNINITIALISED):
            return self._after(func, args, kwargs, out, _tensors(args, kwargs), None)
        return out

    @classmethod
    def skip_dynamo(cls) -> None:
        """Dynamo must never trace the mode (ops of a compiled graph reach it while
        Dynamo's frame callback is set): skip its frame and every frame it calls."""
        require("torch_neuronx.numerics.dispatch_mode.NumericsMode.skip_dynamo "
                "(torch._C._dynamo.eval_frame.set_code_exec_strategy)", SKIP_DYNAMO_WRITTEN_FOR)
        from torch._C._dynamo.eval_frame import set_code_exec_strategy
        from torch._dynamo.types import FrameAction, FrameExecStrategy

        for method in (cls.__torch_dispatch__, cls.dispatch, cls.produced):  # the C++ filter calls the last two
            set_code_exec_strategy(method.__code__, FrameExecStrategy(FrameAction.SKIP, FrameAction.SKIP))

    def _after(self, func, args, kwargs, out, tensors, snapshot):
        outs = recompute.neuron_outputs(func, args, kwargs, out)
        if not outs and not tensors:
            return out
        name = func._schema.name
        neuron_in = [t for t in tensors if recompute.is_plain_neuron(t)]
        try:
            if self.emulate:
                self._emulate(func, args, kwargs, out, tensors, neuron_in, outs, snapshot)
            else:
                self._check(func, args, kwargs, out, neuron_in, outs, snapshot)
        except float64.NumericsUnsupportedError:
            raise
        except Exception as err:  # noqa: BLE001 - never break the user's op; say so once
            if name not in self._warned:
                self._warned.add(name)
                warnings.warn(
                    f"TORCH_NEURONX_NUMERICS={self.config.mode}: {name} (at {report.user_site()}) cannot be "
                    f"{'emulated' if self.emulate else 'checked'} ({type(err).__name__}: {err}); "
                    "its result uses host numerics.", RuntimeWarning, stacklevel=2)
        return out

    def _check(self, func, args, kwargs, out, neuron_in, outs, snapshot) -> None:
        name = func._schema.name
        both = neuron_in + outs
        if self.int64_on and any(t.dtype in int64.DTYPES for t in both):
            report.expose("int64", name)
            int64.check(name, outs)  # where a lossy value is produced, not every op it flows through
        if int_via_fp32.applies(func, neuron_in) or int_via_fp32.applies_reduce(func, args, kwargs, neuron_in):
            report.expose("int_via_fp32", name)
            int_via_fp32.check(func, args, kwargs, out, snapshot)
        if float64.involved(both, kwargs):
            report.expose("float64", name)
            float64.check(func, args, kwargs, out, snapshot)
        if self.fp8_on and any(t.dtype in fp8.DTYPES for t in outs):
            report.expose("fp8", name)
            fp8.check(name, outs)

    def _emulate(self, func, args, kwargs, out, tensors, neuron_in, outs, snapshot) -> None:
        if int_via_fp32.applies(func, neuron_in) or int_via_fp32.applies_reduce(func, args, kwargs, neuron_in):
            int_via_fp32.emulate(func, args, kwargs, out, snapshot)
        elif float64.involved(neuron_in + outs, kwargs):
            float64.emulate(func, args, kwargs, out, snapshot)
        elif self.sr is not None and mx_matmul.applies(func, outs):
            mx_matmul.emulate(func, args, kwargs, out, self.sr)
        elif self.sr is not None and stochastic_rounding.applies(func, tensors, outs):
            stochastic_rounding.emulate(func, args, kwargs, out, snapshot, self.sr)
        if self.int64_on:
            for t in outs:
                if t.dtype in int64.DTYPES:
                    int64.wrap_(t)
        if self.fp8_on:
            fp8.emulate(outs, self.config.fp8_overflow)
