"""The dispatch mode that sees every eager ATen op on neuron while an estimate is collected.

Modelled on torch.distributed._tools.runtime_estimator: a TorchDispatchMode runs each op
unchanged, then records its estimate, attributed to the nn.Module paths ModTracker reports
(forward or backward). It is pushed only inside `estimate()`, so outside it costs nothing;
nested estimates share the costing of the innermost one (recorders.py).
"""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ..compiler import run_rng_ops_under
from . import _eager as eager, _fallbacks as fallbacks, _formulas as formulas, recorders
from ._ops import op_estimate
from ._subclasses import defer_to_subclass

_NEURON = "privateuseone"


def _device_of(leaves, include_fake: bool) -> int | None:
    """Index of the first neuron tensor among the op's tensors (None: not a neuron op)."""
    for t in leaves:
        if isinstance(t, torch.Tensor):
            dev = t.device
            if dev.type == "neuron" or dev.type == _NEURON:
                if not include_fake and isinstance(t, torch._subclasses.FakeTensor):
                    continue
                return dev.index or 0
            if include_fake and isinstance(t, torch._subclasses.FakeTensor):
                return 0
    return None


class EstimateMode(TorchDispatchMode):
    """Entered by each estimate; only the innermost one costs (recorders.is_costing), once per
    hardware, and delivers the cost to every active recorder. The others let ops through."""

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        # torch.compile keeps compiling under this mode; compiled graphs are estimated by
        # _graphs.py, and Dynamo's fake-tensor tracing is skipped below (not neuron memory).
        return True

    def __enter__(self):
        out = super().__enter__()
        recorders.enter_mode(self)
        return out

    def __exit__(self, *exc):
        recorders.exit_mode(self)
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if defer_to_subclass(types, args, kwargs):
            # A DTensor op carries global shapes: costing it here charged every TP rank the whole
            # matmul. Let the subclass run; its local ops (this core's shards) come back to this mode.
            return NotImplemented
        out = func(*args, **(kwargs or {}))
        if not recorders.is_costing(self):
            return out
        receivers = recorders.receiving_ops()
        if receivers:
            _cost_and_deliver(receivers, func, args, kwargs, out)
        return out


def _devices(receivers, args, kwargs, out) -> dict:
    """{include_fake: device index or None} for the flags the receivers use."""
    found: dict = {}
    leaves = None
    for flag in {r.include_fake for r in receivers}:
        device = _device_of(args, flag)      # top-level tensors: the common case
        if device is None:
            if leaves is None:
                leaves, _ = tree_flatten((args, kwargs, out))
            device = _device_of(leaves, flag)
        found[flag] = device
    return found


def _cost_and_deliver(receivers, func, args, kwargs, out) -> None:
    devices = _devices(receivers, args, kwargs, out)
    groups = [(receivers[0].hardware, receivers)] if len(receivers) == 1 else recorders.by_hardware(receivers)
    for hw, group in groups:
        group = [r for r in group if devices[r.include_fake] is not None]
        if not group:
            continue
        try:
            fallback = fallbacks.charge(func, args, kwargs, out, hw)  # a CPU_FALLBACK op
            e = fallback if fallback is not None else op_estimate(func, args, kwargs, out, hardware=hw)
        except Exception as err:  # noqa: BLE001 - estimation must never break the program
            formulas.warn_unmodelled(f"{formulas.op_name(func)} ({type(err).__name__}: {err})")
            for r in group:
                r.no_model(formulas.op_name(func))
            continue
        sync = fallback is not None or eager.is_host_sync(func, args, kwargs, out)
        for r in group:
            r.take_op(e, func, args, kwargs, out, devices[r.include_fake], sync)


# activation checkpointing inside compiled graphs calls torch's RNG higher-order ops: run them here
run_rng_ops_under(EstimateMode)
