"""Per logical core: peak HBM of a dry run, what it holds at the peak, and the allocation that failed.

The peak itself is the caching allocator's own statistic (max_memory_allocated / reserved), so it
is exactly what a real run reports. The breakdown is taken when allocated bytes first come within
1% of the peak (the last such moment is kept), and sorts the live storages into the categories of
torch.distributed._tools.mem_tracker (parameters, buffers, gradients, optimizer state) plus the KV
cache of a Hugging Face `Cache` being generated with; activations are the rest (saved activations,
temporaries, inputs, allocator rounding). MemTracker itself is not used: it refuses a module
called twice ("does not support multiple iterative calls"), and a script's loop calls every
module many times.
"""
from __future__ import annotations

import sys
import weakref

import torch

CATEGORIES = ("parameters", "gradients", "optimizer_state", "activations", "kv_cache", "other")


class _Registry:
    """The modules and optimizers that hold parameters and buffers, as they are created.

    Weak references go to the modules and optimizers, never to the tensors: a tensor with a weak
    reference cannot be swapped, and `module.to()` swaps wrapper-subclass parameters (a DTensor of
    diffusers' or transformers' TP) with `torch.utils.swap_tensors`, so a dry run must not hold one.
    Reading the modules' `_parameters` at the peak also sees parameters replaced since. Modules are
    found when they register a parameter or buffer, or run a forward (built before the dry run).
    """

    def __init__(self, steps) -> None:
        self.modules: weakref.WeakSet = weakref.WeakSet()      # modules that registered a parameter
        self.buffer_modules: weakref.WeakSet = weakref.WeakSet()
        self.steps = steps           # the dry run's step clock (_steps.py): optimizers, steps done
        self._handles: list = []

    @property
    def optimizers(self):
        return self.steps.optimizers

    @property
    def steps_done(self) -> int:
        return self.steps.done

    @property
    def in_optimizer(self) -> int:
        return self.steps.in_optimizer

    def install(self) -> None:
        from torch.nn.modules import module as nn_module

        def on_param(mod, _name, p):
            if p is not None:
                self.modules.add(mod)

        def on_buffer(mod, _name, b):
            if b is not None:
                self.buffer_modules.add(mod)

        def on_forward(mod, _args):   # a module built before the dry run began is found when it runs
            # Not while Dynamo traces: it would inline the WeakSet and guard on its entries by
            # position, and a module collected before the guards are built breaks them (IndexError).
            # A compiled step's modules were built, and so registered, before it compiles.
            if torch.compiler.is_compiling():
                return
            if mod._parameters:
                self.modules.add(mod)
            if mod._buffers:
                self.buffer_modules.add(mod)

        self._handles = [nn_module.register_module_parameter_registration_hook(on_param),
                         nn_module.register_module_buffer_registration_hook(on_buffer),
                         nn_module.register_module_forward_pre_hook(on_forward)]

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def params(self) -> list:
        """Live parameters: the registered modules' and the stepped optimizers' (each once)."""
        found = {id(p): p for m in list(self.modules) for p in m._parameters.values() if p is not None}
        for opt in list(self.optimizers):
            for group in opt.param_groups:
                found.update((id(p), p) for p in group["params"])
        return list(found.values())

    def buffers(self) -> list:
        return [b for m in list(self.buffer_modules) for b in m._buffers.values() if b is not None]


def _kv_caches() -> list:
    """Hugging Face Cache objects held by frames on the stack (generate(), the model's forward)."""
    cache_utils = sys.modules.get("transformers.cache_utils")
    if cache_utils is None or not hasattr(cache_utils, "Cache"):
        return []
    found, seen = [], set()
    frame = sys._getframe(1)
    while frame is not None:
        for v in frame.f_locals.values():
            if isinstance(v, cache_utils.Cache) and id(v) not in seen:
                seen.add(id(v))
                found.append(v)
        frame = frame.f_back
    return found


def _tensors_in(obj, depth: int = 3) -> list:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if depth == 0:
        return []
    if isinstance(obj, (list, tuple)):
        return [t for x in obj for t in _tensors_in(x, depth - 1)]
    if isinstance(obj, dict):
        return [t for x in obj.values() for t in _tensors_in(x, depth - 1)]
    if hasattr(obj, "__dict__") and not isinstance(obj, (type, torch.nn.Module)):
        return [t for x in vars(obj).values() for t in _tensors_in(x, depth - 1)]
    return []


def _innermost_module() -> str | None:
    """The deepest module running now, from the estimate's ModTracker (None outside modules)."""
    from ..estimate import recorders
    from ..estimate import Estimate

    tracker = getattr(recorders.innermost(Estimate), "_tracker", None)
    parents = [p for p in getattr(tracker, "parents", ()) if p != "Global"]
    return max(parents, key=lambda name: (name.count("."), len(name))) if parents else None


def _storage_sum(tensors, device: int, seen: set) -> int:
    total = 0
    for t in tensors:
        t = getattr(t, "_local_tensor", t)   # a DTensor (TP, FSDP2) has no storage: count its local shard
        if not isinstance(t, torch.Tensor) or t.device.type != "neuron" or (t.device.index or 0) != device:
            continue
        st = t.untyped_storage()
        key = st.data_ptr()
        if key in seen or key == 0:
            continue
        seen.add(key)
        total += st.nbytes()
    return total


class Memory:
    def __init__(self, steps) -> None:
        self.registry = _Registry(steps)
        self.watching = False
        self._snap_at: dict[int, int] = {}
        self.breakdown: dict[int, dict] = {}
        self.peak_at: dict[int, dict] = {}   # per core: where the run was at the breakdown's moment
        self.oom: dict | None = None

    def start(self) -> None:
        self.registry.install()
        for d in range(torch.neuron.device_count()):
            torch.neuron.reset_peak_memory_stats(d)
        self.watching = True

    def stop(self) -> None:
        self.watching = False
        self.registry.remove()

    def after_op(self) -> None:
        device = torch.neuron.current_device()
        now = torch._C._accelerator_getDeviceStats(device)["allocated_bytes"]["all"]["current"]  # 10x cheaper than memory_allocated()
        if now * 100 >= self._snap_at.get(device, 0) * 101 and now > 0:
            self._snap_at[device] = now
            self.breakdown[device] = self.categorise(device, now)
            self.peak_at[device] = self.where()

    def where(self) -> dict:
        """The phase (forward, backward, optimizer), the step and the module running now. `step` is
        1-based: the optimizer step this moment belongs to (steps finished + 1); so a peak in
        `step 2`'s forward comes after step 1's `zero_grad(set_to_none=True)` dropped the gradients."""
        reg = self.registry
        if reg.in_optimizer:
            phase = "optimizer"
        elif torch._C._current_graph_task_id() != -1:   # inside autograd's engine
            phase = "backward"
        else:
            phase = "forward"
        return {"phase": phase, "step": reg.steps_done + 1, "optimizer_steps_done": reg.steps_done,
                "module": _innermost_module()}

    def categorise(self, device: int, allocated: int) -> dict:
        reg = self.registry
        seen: set = set()
        params = reg.params()
        out = {"parameters": _storage_sum(params, device, seen)}
        out["gradients"] = _storage_sum([p.grad for p in params if p.grad is not None], device, seen)
        opt_state = [t for opt in list(reg.optimizers) for s in opt.state.values() for t in _tensors_in(s, 2)]
        out["optimizer_state"] = _storage_sum(opt_state, device, seen)
        out["kv_cache"] = _storage_sum([t for c in _kv_caches() for t in _tensors_in(c)], device, seen)
        out["other"] = _storage_sum(reg.buffers(), device, seen)
        out["activations"] = max(0, allocated - sum(out.values()))
        out["at_allocated_bytes"] = allocated
        return {k: out[k] for k in (*CATEGORIES, "at_allocated_bytes")}

    def record_oom(self, err: BaseException, site: str) -> None:
        if self.oom is None:   # the first failing allocation is the one a real run stops at
            device = torch.neuron.current_device()
            self.oom = {"device": device, "site": site, "message": str(err).split("\n")[0]}
            self.breakdown[device] = self.categorise(device, torch.accelerator.memory_allocated(device))
            self.peak_at[device] = self.where()

    def per_core(self) -> list[dict]:
        from .. import _C

        rows = []
        for d in range(torch.neuron.device_count()):
            peak = torch.neuron.max_memory_allocated(d)
            reserved = torch.neuron.max_memory_reserved(d)
            if peak == 0 and reserved == 0 and not (self.oom and self.oom["device"] == d):
                continue
            capacity = int(_C._hbm_capacity(d))
            oom = self.oom if self.oom and self.oom["device"] == d else None
            rows.append({"device": d, "peak_allocated_bytes": peak, "peak_reserved_bytes": reserved,
                         "capacity_bytes": capacity, "headroom_bytes": capacity - reserved,
                         "fits": oom is None, "oom": oom,
                         "breakdown": self.breakdown.get(d, {k: 0 for k in CATEGORIES}),
                         "peak_at": self.peak_at.get(d)})
        return rows
