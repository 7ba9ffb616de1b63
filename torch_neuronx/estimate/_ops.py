"""Per-op roofline estimate: time = max(FLOPs / engine rate, bytes / HBM bandwidth) + launch.

Shapes, strides and dtypes are all it reads, so real neuron tensors, FakeTensors and meta tensors
give the same answer (the dry-run planner calls it with shapes only).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from . import _builtin_costs  # noqa: F401 - the cost model's own entries in the one cost registry
from . import _decompose as decompose, _formulas as formulas
from ._costs import Cost, registered_cost
from .hardware import LOW_PRECISION, Hardware, dtype_name
from .hardware import hardware as _hardware


@dataclass(frozen=True)
class OpEstimate:
    name: str            # "aten.mm"
    seconds: float       # estimated device time, launch included
    bound: str           # "compute" | "memory" | "launch" | "none" (metadata only, no device work)
    category: str        # "matmul" | "attention" | "elementwise" | "reduction" | "copy" | "view" | "collective"
    flops: int
    bytes: int           # HBM bytes read + written
    engine: str          # "tensor" | "vector" | "scalar" | "dma" | "none" | "collective"
    compute_s: float = 0.0
    memory_s: float = 0.0
    launch_s: float = 0.0
    dtype: str = ""
    modelled: bool = True   # False: no model for the op; counted as Vector-engine work
    # a TensorEngine op's compute_s as (FLOPs at matmul_efficiency, operand fill at hbm_efficiency,
    # fixed DMA latency and other work): what each efficiency assumption scales (roofline_terms)
    tensor_parts: tuple = ()

    def as_dict(self) -> dict:
        return asdict(self)


def _free(name: str, category: str, engine: str = "none") -> OpEstimate:
    return OpEstimate(name, 0.0, "none", category, 0, 0, engine)


def _vector_dtype(ts) -> str:
    names = [dtype_name(t.dtype) for t in ts if t.is_floating_point()]
    if names and all(n in LOW_PRECISION for n in names):
        return names[0]
    return "float32"


def roofline_terms(e: OpEstimate) -> tuple[float, float, float, float, float]:
    """(TensorEngine seconds at matmul_efficiency, TensorEngine seconds at hbm_efficiency (its
    operand fill), fixed TensorEngine seconds, other engines' seconds, HBM seconds) of an op: its
    time less the launch is max(the first three's sum, the fourth, the fifth). Kept with each
    recorded op so a report can say what other efficiencies would change (estimate/roofline.py)."""
    if e.engine != "tensor":
        return (0.0, 0.0, 0.0, e.compute_s, e.memory_s)
    matmul, fill, fixed = e.tensor_parts or (e.compute_s, 0.0, 0.0)
    return (matmul, fill, fixed, 0.0, e.memory_s)


def roofline(name, category, engine, flops, nbytes, compute_s, hw: Hardware, launch_s: float,
             dtype: str, modelled: bool = True, tensor_parts: tuple = ()) -> OpEstimate:
    memory_s = nbytes / (hw.hbm_bytes_per_s * hw.assumptions.hbm_efficiency)
    body = max(compute_s, memory_s)
    if launch_s > body:
        bound = "launch"
    else:
        bound = "compute" if compute_s >= memory_s else "memory"
    return OpEstimate(name, body + launch_s, bound, category, int(flops), int(nbytes), engine,
                      compute_s, memory_s, launch_s, dtype, modelled, tensor_parts)


def _registered(name, cost: Cost, ins, outs, nbytes, hw: Hardware, launch_s: float) -> OpEstimate:
    """A cost from the registry (register_cost): FLOPs on the Tensor engine as every matmul is
    charged (its rate, pipeline fill and DMA latency), elements at the Vector engine's rate, bytes
    at HBM bandwidth, through the same roofline as every op."""
    every = ins + outs
    dtype = dtype_name(every[0].dtype) if every else "float32"
    nbytes = nbytes if cost.bytes is None else cost.bytes
    vector = (cost.elements / (hw.vector_elems_per_s(dtype, 1) * hw.assumptions.vector_efficiency)
              if cost.elements else 0.0)
    category = cost.category or ("matmul" if cost.flops else "elementwise")
    if not cost.flops:
        return roofline(name, category, "vector", 0, nbytes, vector, hw, launch_s, dtype)
    peak = hw.tensor_flops(dtype) if cost.tensor_rate is None else hw.tensor_rate(cost.tensor_rate, name)
    dtype = cost.tensor_rate or dtype
    matmul = cost.flops / (peak * hw.assumptions.matmul_efficiency)
    latency, fill = _pipeline_fill_s(cost.flops, ins, outs, nbytes, hw)
    return roofline(name, category, "tensor", cost.flops, nbytes, matmul + fill + latency + vector, hw, launch_s,
                    dtype, tensor_parts=(matmul, fill, latency + vector))


def _pipeline_fill_s(flops, ins, outs, nbytes, hw: Hardware) -> tuple[float, float]:
    """TensorEngine waits for its first operands: a well-tiled matmul keeps the moving operand
    ([K, N]) resident in SBUF when it fits in half of it (else one [K, 512] tile, nl.tile_size
    gemm limits) and streams the stationary one in blocks of up to 512 rows, so the first matmul
    starts after one DMA (fixed latency, neuron_hardware) of the resident operand and the first
    block; K = FLOPs / (2 x output elements). This is the NKI guide's optimized matmul; the NKI
    simulator, whose TensorEngine runs at the published peak, agrees within 10% on shapes and
    dtypes nothing was fitted to (tests/estimate/test_nki_agreement.py)."""
    if not outs or not ins or outs[0].numel() == 0:
        return 0.0, 0.0
    out = outs[0]
    k = flops / (2 * out.numel())
    n = out.shape[-1] if out.dim() else 1
    m = out.numel() // max(n, 1)
    elem = ins[0].element_size()
    sbuf = hw.view.sbuf_bytes
    resident = k * n * elem
    if resident > sbuf / 2:
        resident = k * 512 * elem
    fill_bytes = min(nbytes, resident + k * min(512, m) * elem)
    return hw.chip.dma_fixed_latency_ns * 1e-9, fill_bytes / (hw.hbm_bytes_per_s * hw.assumptions.hbm_efficiency)


def _decomposed(name, func, args, kwargs, hw: Hardware, launch: float) -> OpEstimate | None:
    """A fused or composite op without a formula, costed as the sum of its decomposition's ops
    (_decompose.py), with one launch; None when it has no decomposition."""
    p = decompose.parts(func, args, kwargs, hw, op_estimate)   # each part costed as any op
    if p is None:
        return None
    body = p.seconds
    if launch > body:
        bound = "launch"
    else:
        bound = "compute" if p.compute_s >= p.memory_s else "memory"
    dtype = ""
    ts = formulas.tensors((args, kwargs))
    if ts:
        dtype = _vector_dtype(ts) if not p.flops else dtype_name(ts[0].dtype)
    return OpEstimate(name, body + launch, bound, p.category, p.flops, p.bytes, p.engine,
                      p.compute_s, p.memory_s, launch, dtype, not p.unmodelled)


def op_estimate(func, args, kwargs, out, *, hardware: Hardware | None = None,
                launch_s: float | None = None) -> OpEstimate:
    """Estimated Trainium device time of one ATen op call.

    Args:
        func: the OpOverload (as a TorchDispatchMode sees it), e.g. torch.ops.aten.mm.default.
        args, kwargs, out: its arguments and result (real, fake or meta tensors).
        hardware: from `torch_neuronx.estimate.hardware()`; default: the environment's instance.
        launch_s: launch overhead to add; default the eager one (assumption `eager_launch_s`).
    """
    hw = hardware if hardware is not None else _hardware()
    name = formulas.op_name(func)
    namespace = name.split(".", 1)[0]
    if namespace in formulas.NO_DEVICE_NAMESPACES:
        return _free(name, "collective" if "c10d" in namespace else "view",
                     "collective" if "c10d" in namespace else "none")
    if formulas.is_view(func):
        return _free(name, "view")
    launch = hw.assumptions.eager_launch_s if launch_s is None else launch_s
    ins = formulas.tensors((args, kwargs))
    outs = formulas.tensors(out)
    moved = formulas.moved_bytes(func, ins, outs)
    nbytes = moved if moved is not None else (
        sum(formulas.touched_bytes(t) for t in ins) + sum(formulas.touched_bytes(t) for t in outs))
    custom = registered_cost(func, args, kwargs, out)
    if custom is not None:
        return _registered(name, custom, ins, outs, nbytes, hw, launch)
    flops = formulas.flops(func, args, kwargs, out)
    if flops is not None:   # PyTorch's formula (the registry's, above, come first)
        return _registered(name, Cost(flops=flops), ins, outs, nbytes, hw, launch)
    packet = func._overloadpacket.__name__
    category, engine, passes, modelled = formulas.classify(func)
    if not modelled:
        whole = _decomposed(name, func, args, kwargs, hw, launch)
        if whole is not None:
            return whole
        formulas.warn_unmodelled(name)
    every = ins + outs
    if not every:
        return roofline(name, category, engine, 0, 0, 0.0, hw, launch, "", modelled)
    elems = max(t.numel() for t in every)
    if packet.startswith("_foreach_"):    # the op runs over every tensor of its first list
        first = args[0] if args and isinstance(args[0], (list, tuple)) else every
        elems = sum(t.numel() for t in first if isinstance(t, torch.Tensor)) or elems
    if moved is not None:   # indexed reads/writes touch only the moved elements
        elems = max(1, moved // max(1, every[0].element_size()))
    dtype = _vector_dtype(every)
    if engine == "dma":      # data movement: HBM traffic only
        compute_s = 0.0
    elif engine == "scalar":
        compute_s = passes * elems / (hw.scalar_elems_per_s(dtype) * hw.assumptions.vector_efficiency)
    else:
        # a broadcast operand (per-row scale, bias vector) is an instruction scalar, not a 2nd stream
        inputs = min(2, sum(1 for t in ins if t.numel() == elems)) or 1
        compute_s = passes * elems / (hw.vector_elems_per_s(dtype, inputs) * hw.assumptions.vector_efficiency)
    return roofline(name, category, engine, 0, nbytes, compute_s, hw, launch, dtype, modelled)
