"""`torch.compile(f)` with no `backend=` compiles neuron inputs with the neuron backend.

TorchNeuron's compile reference: the backend is "explicitly set, or auto-selected
when running on a Neuron device". torch.compile's default (`backend="inductor"`)
hands each Dynamo graph to `torch._TorchCompileInductorWrapper`; its `__call__`
is wrapped here so that a graph with an input on neuron goes to `neuron_backend`
instead (static shapes, the compile cache, metrics, fallback policy), and any
other graph to Inductor unchanged. Installing is one attribute swap at
registration; nothing is imported until a graph is compiled.

TORCH_NEURONX_DEFAULT_COMPILE_BACKEND=0 turns the routing off (Inductor then
compiles neuron graphs itself, through _registration.py). An explicit
`backend="inductor"` is indistinguishable from the default and is routed too;
`backend=torch._inductor.compile_fx.compile_fx` keeps Inductor for one call.
"""
from __future__ import annotations

import logging

import torch

from ..runtime import env

ENV = "TORCH_NEURONX_DEFAULT_COMPILE_BACKEND"
logger = logging.getLogger("torch_neuronx.compiler")
_said = {"routed": False, "ignored": set()}


def enabled() -> bool:
    value = env.parse_flag(ENV)  # a bad value raises, naming the variable
    return True if value is None else value


def _on_neuron(inputs) -> bool:
    return any(isinstance(x, torch.Tensor) and x.device.type == "neuron" for x in inputs)


def _say_once(config: dict) -> None:
    if not _said["routed"]:
        _said["routed"] = True
        logger.info("torch.compile without backend= got neuron inputs: compiling with backend='neuron' "
                    "(set %s=0 to keep Inductor)", ENV)
    ignored = tuple(sorted(config))
    if ignored and ignored not in _said["ignored"]:
        _said["ignored"].add(ignored)
        logger.warning("the neuron backend ignores Inductor's mode/options settings %s (it supports "
                       "mode='default' only)", list(ignored))


def install() -> None:
    """Wrap torch.compile's default-backend object once (idempotent)."""
    cls = getattr(torch, "_TorchCompileInductorWrapper", None)
    if cls is None or getattr(cls.__call__, "_neuron_routing", False):
        return
    inductor_call = cls.__call__

    def __call__(self, model_, inputs_, *args, **kwargs):
        if _on_neuron(inputs_) and enabled():
            from . import neuron_backend

            _say_once(self.config)
            return neuron_backend(model_, inputs_)
        return inductor_call(self, model_, inputs_, *args, **kwargs)

    __call__._neuron_routing = True
    __call__.__wrapped__ = inductor_call
    cls.__call__ = __call__
