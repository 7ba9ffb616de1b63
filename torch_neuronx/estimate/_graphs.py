"""Compiled graphs estimated as fused programs: one launch per graph, HBM traffic at fusion boundaries.

When a graph compiled by the neuron backend first runs inside `estimate()`, its Dynamo graph is
re-run on FakeTensors (shapes only, nothing real is touched) forward and, when its outputs need
gradients, backward, recording the ATen ops. The op list is then cut into kernels the way
Inductor's scheduler fuses them, approximately:
- each matmul / convolution / attention op is its own kernel (Inductor calls an extern kernel);
- every other op between two of them, in the same phase (forward or backward), is fused into one
  kernel (Inductor fuses pointwise and reduction ops, and views cost nothing);
- a kernel moves only the tensors it reads that another kernel (or the caller) produced, and the
  tensors it produces that another kernel, the backward or the caller uses; an op whose registered
  cost states its bytes (`Cost(bytes=...)`, a kernel's own DMA traffic) moves those.
Each kernel's time is max(its engine work, its boundary bytes / HBM bandwidth); the program adds
one launch (assumption graph_launch_s) for the forward graph and one for the backward graph.
Ignored: Inductor's exact fusion decisions (it may split a group, or fuse epilogues into matmuls),
recomputation chosen by the partitioner, SBUF capacity limits on fused kernels, and overlap of
consecutive kernels. The eager equivalent (every op its own launch and full HBM round trip) is
kept next to it, so the report can say why the graph is faster.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from . import _broadcast as broadcast, _formulas as formulas, recorders
from .hardware import Hardware
from ._costs import stated_bytes
from ._ops import op_estimate, roofline_terms
from ._subclasses import defer_to_subclass


@dataclass
class GraphEstimate:
    name: str
    seconds: float = 0.0
    launch_s: float = 0.0
    flops: int = 0
    bytes: int = 0
    bound: str = "memory"
    ops: int = 0
    kernels: int = 0
    compute_s: float = 0.0
    memory_s: float = 0.0
    # per kernel, its roofline terms (_ops.roofline_terms, summed over the kernel's ops per engine)
    kernel_terms: tuple = ()
    eager_seconds: float = 0.0     # the same ops run eagerly: one launch and a full HBM round trip each
    eager_bytes: int = 0
    eager_launches: int = 0
    categories: dict = field(default_factory=dict)
    unmodelled: tuple = ()         # ops of the graph the cost model has no model for

    def breakdown(self) -> dict:
        return {"ops": self.ops, "kernels": self.kernels, "launches": 1, "hbm_bytes": self.bytes,
                "eager_seconds": self.eager_seconds, "eager_hbm_bytes": self.eager_bytes,
                "eager_launches": self.eager_launches, "compute_s": self.compute_s,
                "memory_s": self.memory_s, "categories": dict(self.categories)}

    def explain(self) -> str:
        saved = self.eager_seconds - self.seconds
        return (f"{self.name}: {self.ops} ops fused into {self.kernels} kernels and 1 launch "
                f"(eager: {self.eager_launches} launches); HBM traffic {self.bytes / 1e6:.3g} MB vs "
                f"{self.eager_bytes / 1e6:.3g} MB eager; estimated {self.seconds * 1e6:.1f} us vs "
                f"{self.eager_seconds * 1e6:.1f} us eager ({saved * 1e6:.1f} us saved)")


class _Recorder(TorchDispatchMode):
    """Records (func, args, kwargs, out, phase) of every op run on fake tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list = []
        self.phase = "forward"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if defer_to_subclass(types, args, kwargs):
            # a DTensor op (torch's tensor-parallel styles) carries global shapes: let the subclass
            # run, and record the local ops it runs on this core's shards (as the eager mode does)
            return NotImplemented
        out = func(*args, **(kwargs or {}))
        self.calls.append((func, args, kwargs or {}, out, self.phase))
        return out


def _key(t: torch.Tensor):
    return t.untyped_storage()._cdata


def trace(gm, args, *, backward: bool = True):
    """The ATen ops of `gm(*args)` (and of its backward), run on FakeTensors; plus the keys of
    the caller-visible outputs per phase."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    rec = _Recorder()
    with fake_mode:
        fakes = [fake_mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        for real, fake in zip(args, fakes):
            if isinstance(real, torch.Tensor) and real.requires_grad and fake.is_leaf:
                fake.requires_grad_(True)
        # parameters held by the graph module (get_attr) become fake leaves as well
        state_fakes = {}
        for n, p in list(gm.named_parameters()) + list(gm.named_buffers()):
            f = fake_mode.from_tensor(p)
            if p.requires_grad:
                f.requires_grad_(True)
            state_fakes[n] = f
        with rec:
            outs = torch.func.functional_call(gm, state_fakes, tuple(fakes))
        flat = [o for o in tree_flatten(outs)[0] if isinstance(o, torch.Tensor)]
        out_keys = {"forward": {_key(o) for o in flat}, "backward": set()}
        diff = [o for o in flat if o.requires_grad]
        leaves = [f for f in list(fakes) + list(state_fakes.values())
                  if isinstance(f, torch.Tensor) and f.requires_grad and f.is_leaf]
        if backward and diff and leaves:
            rec.phase = "backward"
            with rec:
                grads = torch.autograd.grad(diff, leaves, [torch.ones_like(o) for o in diff],
                                            allow_unused=True)
            out_keys["backward"] = {_key(g) for g in grads if g is not None}
    return rec.calls, out_keys


# in-place ops that write only the indexed part of their first argument (index_copy_ is how a
# static KV cache takes one step's keys): their write moves the source's bytes, not the whole tensor
_INDEXED_WRITES = {"index_copy_", "index_put_", "scatter_", "scatter_add_", "index_add_"}


# ops that read only the rows their indices select from their first argument (an embedding lookup
# of one token per sequence reads one row of the table): they move their output's bytes from it
_INDEXED_READS = {"embedding", "index_select", "gather"}


def _packet(func) -> str:
    return func._overloadpacket.__name__ if getattr(func, "_overloadpacket", None) is not None else ""


def _indexed_write(func) -> bool:
    return _packet(func) in _INDEXED_WRITES


def _indexed_read(func) -> bool:
    return _packet(func) in _INDEXED_READS


def _is_kernel_boundary(e) -> bool:
    return e.engine == "tensor"


def program(calls, out_keys, hw: Hardware, name: str) -> dict[str, GraphEstimate]:
    """Estimate the recorded ops as one fused program per phase (see the module docstring)."""
    ests = {}
    per = [(func, a, k, o, ph, op_estimate(func, a, k, o, hardware=hw, launch_s=0.0))
           for func, a, k, o, ph in calls]
    per = [p for p in per if p[5].bound != "none" and p[5].category != "collective"]
    # kernel ids: a matmul-like op alone, else a run of fusible ops in one phase
    kernel_of = []
    kid, prev_phase, prev_boundary = -1, None, True
    for func, a, k, o, ph, e in per:
        boundary = _is_kernel_boundary(e)
        if boundary or prev_boundary or ph != prev_phase:
            kid += 1
        kernel_of.append(kid)
        prev_phase, prev_boundary = ph, boundary
    producer: dict = {}
    size: dict = {}
    readers: dict = {}
    for (func, a, k, o, ph, e), kern in zip(per, kernel_of):
        for t in formulas.tensors((a, k)):
            readers.setdefault(_key(t), set()).add(kern)
            size.setdefault(_key(t), 0)
            size[_key(t)] = max(size[_key(t)], formulas.touched_bytes(t))
        for t in formulas.tensors(o):
            producer.setdefault(_key(t), kern)
            size[_key(t)] = max(size.get(_key(t), 0), formulas.touched_bytes(t))
    outputs = out_keys["forward"] | out_keys["backward"]
    # broadcast copies (grouped-query attention's repeated KV heads) that only matmuls read: not
    # materialised, the matmul reads their source (_broadcast.py)
    boundary_kernels = {kern for p, kern in zip(per, kernel_of) if _is_kernel_boundary(p[5])}
    elided = broadcast.elided(per, kernel_of, boundary_kernels, outputs, _key)
    via_copy = {out: (src, src_bytes, copy_bytes) for src, src_bytes, copy_bytes, out in elided.values()}
    reuse = hw.assumptions.matmul_broadcast_reuse
    kernels: dict[int, dict] = {}
    for i, ((func, a, k, o, ph, e), kern) in enumerate(zip(per, kernel_of)):
        kd = kernels.setdefault(kern, {"phase": ph, "compute": 0.0, "reads": set(), "writes": set(),
                                       "boundary": _is_kernel_boundary(e), "flops": 0, "cats": {}})
        if i in elided:   # not run: its consumers read the source (its category is still counted)
            kd["cats"][e.category] = kd["cats"].get(e.category, 0) + 1
            kd["elided"] = kd.get("elided", 0) + 1
            continue
        # engines of a fused kernel run concurrently: its compute is the busiest engine's work
        kd.setdefault("engines", {})[e.engine] = kd.setdefault("engines", {}).get(e.engine, 0.0) + e.compute_s
        kd["compute"] = max(kd["engines"].values())
        if e.engine == "tensor":   # what of its TensorEngine time each efficiency scales (roofline_terms)
            parts = roofline_terms(e)[:3]
            kd["tensor_parts"] = tuple(x + y for x, y in zip(kd.get("tensor_parts", (0.0, 0.0, 0.0)), parts))
        kd["flops"] += e.flops
        kd["cats"][e.category] = kd["cats"].get(e.category, 0) + 1
        if kd["boundary"]:
            stated = stated_bytes(func, a, k, o)
            if stated is not None:   # a registered cost that states its HBM traffic (a kernel's own DMA)
                kd["stated_bytes"] = stated
        for n, t in enumerate(formulas.tensors((a, k))):
            if _key(t) in via_copy:   # an elided broadcast copy: read its source
                src, src_bytes, copy_bytes = via_copy[_key(t)]
                kd["reads"].add(src)
                part = broadcast.read_bytes(src_bytes, copy_bytes, reuse)
                kd.setdefault("partial", {})[src] = kd.get("partial", {}).get(src, 0) + part
            elif producer.get(_key(t)) != kern:
                kd["reads"].add(_key(t))
                if n == 0 and _indexed_read(func):   # the rows it gathers, not the whole table
                    part = sum(formulas.touched_bytes(x) for x in formulas.tensors(o))
                    kd.setdefault("partial", {})[_key(t)] = kd.get("partial", {}).get(_key(t), 0) + part
        for t in formulas.tensors(o):
            key = _key(t)
            if producer.get(key) == kern and (key in outputs or readers.get(key, {kern}) - {kern}):
                kd["writes"].add(key)
                if _indexed_write(func):   # writes only the rows it is given (a KV cache update)
                    part = sum(formulas.touched_bytes(x) for x in formulas.tensors((a[1:], k)))
                    kd.setdefault("partial", {})[key] = kd.get("partial", {}).get(key, 0) + part
    bw = hw.hbm_bytes_per_s * hw.assumptions.hbm_efficiency
    for phase in ("forward", "backward"):
        mine = [kd for kd in kernels.values() if kd["phase"] == phase and "engines" in kd]
        gone = [kd for kd in kernels.values() if kd["phase"] == phase and "engines" not in kd]
        ops = [p for p in per if p[4] == phase]
        if not ops:
            continue
        g = GraphEstimate(f"{name}:{phase}", launch_s=hw.assumptions.graph_launch_s)
        terms = []
        for kd in mine:
            partial = kd.get("partial", {})
            nbytes = kd["stated_bytes"] if "stated_bytes" in kd else \
                sum(partial.get(x, size[x]) for x in kd["reads"] | kd["writes"])
            mem = nbytes / bw
            g.bytes += nbytes
            g.compute_s += kd["compute"]
            g.memory_s += mem
            g.seconds += max(kd["compute"], mem)
            other = max((v for k, v in kd["engines"].items() if k != "tensor"), default=0.0)
            terms.append((*kd.get("tensor_parts", (0.0, 0.0, 0.0)), other, mem))
            g.flops += kd["flops"]
            for c, n in kd["cats"].items():
                g.categories[c] = g.categories.get(c, 0) + n
        for kd in gone:   # kernels of elided copies only
            for c, n in kd["cats"].items():
                g.categories[c] = g.categories.get(c, 0) + n
        g.kernel_terms = tuple(terms)
        g.seconds += g.launch_s
        g.bound = "launch" if g.launch_s > g.seconds - g.launch_s else (
            "compute" if g.compute_s >= g.memory_s else "memory")
        g.ops, g.kernels = len(ops), len(mine)
        g.unmodelled = tuple(sorted({p[5].name for p in ops if not p[5].modelled}))
        g.eager_launches = len(ops)
        g.eager_bytes = sum(p[5].bytes for p in ops)
        g.eager_seconds = sum(p[5].seconds for p in ops) + len(ops) * hw.assumptions.eager_launch_s
        ests[phase] = g
    return ests


def estimate_graph(gm, args, hw: Hardware, name: str = "graph", *, backward: bool = True):
    """{"forward": GraphEstimate, "backward": GraphEstimate (when gradients flow)} for `gm(*args)`."""
    calls, out_keys = trace(gm, args, backward=backward)
    return program(calls, out_keys, hw, name)


# ---- the hook the neuron compile backend calls ------------------------------------------------

def _signature(args) -> tuple:
    return tuple((tuple(a.shape), a.dtype, a.requires_grad) if isinstance(a, torch.Tensor) else
                 type(a).__name__ for a in args)


def _device(args) -> int:
    for a in args:
        if isinstance(a, torch.Tensor) and a.device.type != "cpu":
            return a.device.index or 0
    return 0


def observe(gm, compiled, name: str):
    """Wrap a compiled graph so that inside `estimate()` each call counts as one fused program.

    Outside `estimate()` the wrapper only reads one global and counts the call in the
    stats page (neuron-top's graph counts), so it costs nothing measurable.
    """
    cache: dict = {}
    from .. import _C
    from ..runtime.stats_page import FIELD_INDEX  # the stats page neuron-top reads

    # Bound once: the per-call cost of a compiled decode step is a few microseconds
    # of Python (stats_page.add re-imports _C and looks the field up on every call).
    stats_add, graphs_field = _C._stats_add, FIELD_INDEX["graphs"]
    # The core is found once, at the first call: Dynamo guards every tensor input's device, so
    # each call of this graph has the same devices, and `_device` (`a.device.type` builds a
    # string per tensor) cost ~1.2 us per call, a third of a percent of a compiled decode step.
    core: list = []
    # AOTAutograd returns its program behind a Dynamo disable wrapper, and Dynamo puts what the
    # backend returns behind one more: two wrappers of ~0.5 us each per call (a compiled decode
    # step is ~300 us). `run` calls the program itself and is returned behind one wrapper, which
    # Dynamo's own disable() unwraps to `run` and wraps once.
    program = _unwrapped(compiled)

    def run(*args):
        if not core:
            core.append(_device(args))
        stats_add(core[0], graphs_field, 1)  # one relaxed add into the page: compiled graphs per core
        recs = recorders.active()
        if not recs:
            return program(*args)
        return _run_estimated(recs, gm, program, name, cache, args)

    run.__name__ = f"neuron_graph_{name}"
    return torch._dynamo.disable(run, reason="do not trace a compiled neuron graph")


def _unwrapped(fn):
    """`fn` without its Dynamo disable wrapper, if it has one."""
    if getattr(fn, "_torchdynamo_disable", False):
        return torch._dynamo.eval_frame.innermost_fn(fn)
    return fn


def _estimates(recs, gm, name, cache, args) -> list[tuple]:
    """[(recorders of one hardware, the graph's estimates or None)]: costed once per hardware and
    signature."""
    out = []
    for hw, group in recorders.by_hardware(recs):
        sig = (_signature(args), hw.name, hw.assumptions)
        ests = cache.get(sig, False)
        if ests is False:
            with recorders.suppressed(recs):
                try:
                    ests = estimate_graph(gm, list(args), hw, name, backward=torch.is_grad_enabled())
                except Exception as err:  # noqa: BLE001 - estimation must never break the program
                    formulas.warn_unmodelled(f"compiled graph {name} as a fused program ({type(err).__name__}: "
                                             f"{err}); its extern kernels are counted as eager ops")
                    ests = None
            cache[sig] = ests
        out.append((group, ests))
    return out


def _run_estimated(recs, gm, compiled, name, cache, args):
    """Run the graph once; each recorder whose hardware could cost it gets it as one program (its
    extern kernels are not its eager ops), the others see those kernels as eager ops."""
    per_hw = _estimates(recs, gm, name, cache, args)
    costed = [r for group, ests in per_hw if ests is not None for r in group]
    device = _device(args)
    with recorders.suppressed(costed):
        out = compiled(*args)
    node = None
    for group, ests in per_hw:
        if ests is None:
            continue
        if "forward" in ests:
            recorders.deliver_graph(group, ests["forward"], device)
        bwd = ests.get("backward")
        if bwd is not None:
            if node is None:
                node = next((o.grad_fn for o in tree_flatten(out)[0]
                             if isinstance(o, torch.Tensor) and o.grad_fn is not None), None)
            if node is not None:
                _hook_backward(group, node, bwd, device)
    return out


def _hook_backward(recs, node, bwd: GraphEstimate, device: int) -> None:
    """Count the compiled backward as one program when autograd runs it, and keep the extern
    kernels it calls from being counted again as eager ops (for the recorders still active)."""
    def pre(grad_outputs):
        recorders.begin_suppress(recs)

    def post(grad_inputs, grad_outputs):
        recorders.end_suppress(recs)
        live = recorders.active()
        recorders.deliver_graph([r for r in recs if any(r is a for a in live)], bwd, device, phase="backward")

    node.register_prehook(pre)
    node.register_hook(post)
