"""Estimated Trainium device time for every op, compiled graph and collective.

Contract (stable; the profiler device track and the dry-run planner build on it):

    op_estimate(func, args, kwargs, out, *, hardware=None, launch_s=None) -> OpEstimate
        One ATen op call (func: an OpOverload as a TorchDispatchMode sees it; real, fake or
        meta tensors). OpEstimate fields: name ("aten.mm"), seconds (launch included),
        bound ("compute" | "memory" | "launch" | "none" for metadata-only ops), category
        ("matmul" | "attention" | "elementwise" | "reduction" | "copy" | "view" | "collective"),
        flops, bytes (HBM read + written), engine ("tensor" | "vector" | "scalar" | "dma" |
        "none" | "collective"), plus compute_s, memory_s, launch_s, dtype, modelled.
    hardware(instance_type=None, lnc=None, *, assumptions=None) -> Hardware
        One logical NeuronCore of an instance type (default: TORCH_NEURONX_INSTANCE_TYPE /
        NEURON_LOGICAL_NC_CONFIG); never starts the device.
    estimate(instance=None, lnc=None, ...) -> context manager collecting an Estimate
        `with torch_neuronx.estimate() as est: ...`; est.total_s, breakdowns, est.mfu,
        est.summary(), est.to_json(). Zero cost outside it; never changes results.
    register_cost(ops, *, replace=False)(fn) ; Cost(flops=0, elements=0, bytes=None, category=None)
        The cost of a user's op (or a replacement for an ATen op's): fn(*args, out_val=None,
        **kwargs) -> Cost, checked as torch.utils.flop_counter checks its registry (_costs.py).
        register_cost(ops, Engine(engine, category, passes)) gives an op an engine class instead,
        register_cost(ops, decompose=True)(fn) a decomposition; the cost model's own entries are
        registered the same way (_builtin_costs.py).

Layout: hardware.py (per-logical-core view of `neuron_hardware`), assumptions.py (named,
overridable), _costs.py (the one cost registry) and _builtin_costs.py (its built-in entries),
_formulas.py (FLOPs, bytes, engines), _ops.py (per-op roofline), _decompose.py (ops
without a formula costed from their decomposition), _graphs.py (compiled
graphs as fused programs), collectives.py (c10d), moe.py (mixture-of-experts layers as NxD Inference runs them), _mode.py (the dispatch mode), recorders.py (the
stack of active recorders each cost is delivered to), _report.py,
aten_schema.py (ATen schema and storage reading, shared with the planner and numerics). See docs/estimate.md.
"""
from __future__ import annotations

import sys
import types

from . import assumptions, aten_schema, collectives, moe, roofline
from ._api import Estimate, estimate
from ._costs import Cost, Engine, register_cost
from ._formulas import UnmodelledOpError
from .hardware import Hardware, hardware
from ._ops import OpEstimate, op_estimate

__all__ = ["Cost", "Engine", "Estimate", "Hardware", "OpEstimate", "UnmodelledOpError", "assumptions", "aten_schema",
           "collectives", "estimate", "hardware", "moe", "op_estimate", "register_cost", "roofline"]


class _CallableModule(types.ModuleType):
    """`torch_neuronx.estimate(...)` is the package and the context manager factory at once."""

    def __call__(self, *args, **kwargs) -> Estimate:
        return estimate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
