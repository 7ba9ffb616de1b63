"""TORCH_NEURONX_STRICT_OPS: fail here, at the op, where the script would fail on Trainium.

The virtual NeuronCore runs every op; TorchNeuron does not run an op whose row in the op-support
table is N. With TORCH_NEURONX_STRICT_OPS=1 such an op on a neuron tensor raises
`UnsupportedOpError` naming the op, its dtypes, the source of the row and what to do;
TORCH_NEURONX_STRICT_OPS=fallback also raises on CPU_FALLBACK ops (for a script meant to stay on
the device). Unset or 0: nothing is installed, so it costs nothing.

It is a dispatch mode pushed at startup for the life of the process (as the numerics mode is):
below autograd, so it sees forward and backward ops and the ops compiled graphs run.
"""
from __future__ import annotations

import warnings

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import CPU_FALLBACK, N, PAGE_URL, classify_call, dtype_names
from ..runtime import env

VARIABLE = env.STRICT_OPS
LEVELS = {"0": frozenset(), "1": frozenset({N}), "fallback": frozenset({N, CPU_FALLBACK})}
_state: dict = {"mode": None}


class UnsupportedOpError(RuntimeError):
    """An op TorchNeuron does not run on the Neuron device (strict mode)."""


def level_from_env() -> frozenset:
    """The statuses that raise, from TORCH_NEURONX_STRICT_OPS (unset: none)."""
    raw = env.get(VARIABLE)
    if raw is None:
        return frozenset()
    value = raw.lower()
    if value not in LEVELS:
        raise env.NeuronEnvironmentError(
            f"{VARIABLE}={env.quote(raw)} is not a valid setting; use 1 (raise on ops TorchNeuron does not "
            "support), fallback (also on ops it runs on the CPU) or 0 (off).")
    return LEVELS[value]


def _on_neuron(args, kwargs) -> bool:
    for v in (*args, *kwargs.values()):
        if isinstance(v, torch.Tensor):
            if v.device.type == "neuron":
                return True
        elif isinstance(v, (list, tuple)):
            if any(isinstance(t, torch.Tensor) and t.device.type == "neuron" for t in v):
                return True
        elif isinstance(v, torch.device) and v.type == "neuron":
            return True
    device = kwargs.get("device")
    return isinstance(device, str) and device.startswith("neuron")


def message(func, args, kwargs, row) -> str:
    name = func._schema.name
    dtypes = ", ".join(dtype_names(args, kwargs)) or "no tensor dtype"
    where = "runs on the host CPU, not the device," if row.status == CPU_FALLBACK else "is not supported"
    source = row.source_url or "assumed (docs/op-support.md names the assumption)"
    text = (f"{name} on {dtypes} {where} in TorchNeuron (status {row.status} in the op-support table, "
            f"docs/op-support.md; source: {source}). {row.note}")
    if row.status == N:
        text += " On Trainium the script fails at this op."
    if row.advice:
        text += f" What to do: {row.advice}"
    text += f" Set {VARIABLE}=0 (or unset it) to run it on the virtual NeuronCore anyway."
    return text if row.source_url == PAGE_URL else text + f" TorchNeuron's classification: {PAGE_URL}"


class StrictOpsMode(TorchDispatchMode):
    def __init__(self, raise_on: frozenset) -> None:
        super().__init__()
        self.raise_on = raise_on

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True   # Dynamo traces as usual; compiled graphs run their ops through this mode

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _on_neuron(args, kwargs):
            row = classify_call(func, args, kwargs)
            if row.status in self.raise_on:
                raise UnsupportedOpError(message(func, args, kwargs, row))
        return func(*args, **kwargs)


def install() -> None:
    """At startup: push the mode when TORCH_NEURONX_STRICT_OPS asks for it (never left)."""
    if _state["mode"] is not None:
        return
    try:
        raise_on = level_from_env()
    except env.NeuronEnvironmentError as err:
        # registration must not fail: say so and run without the check
        warnings.warn(f"{err} Running without the strict op check.", RuntimeWarning, stacklevel=2)
        return
    if not raise_on:
        return
    mode = StrictOpsMode(raise_on)
    mode.__enter__()
    _state["mode"] = mode


def active() -> bool:
    return _state["mode"] is not None
