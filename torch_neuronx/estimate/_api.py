"""`torch_neuronx.estimate()`: collect estimated Trainium times of everything run inside it."""
from __future__ import annotations

import functools

from . import recorders
from ..runtime import resolve
from ._eager import Fuser
from ._ops import roofline_terms
from .hardware import hardware_of
from ._report import Report


def _publish_flops(device: int, flops) -> None:
    """Estimated FLOPs executed, added to this process's stats page: neuron-top's
    TFLOPS figures (`F`) and neuron-monitor's "flops" come from it."""
    if flops:
        from ..runtime.stats_page import add

        add(device, "estimated_flops", int(flops))


@functools.cache   # one subclass per tracker class, not one per estimate()
def _eager_hooks_tracker(mod_tracker: type) -> type:
    """ModTracker whose global module hooks, when they run eagerly, are never compiled themselves.

    A module compiled in place (`nn.Module.compile`, diffusers' `compile_repeated_blocks`) runs its
    hooks eagerly around the compiled forward with Dynamo's frame callback still set, so Dynamo
    compiled the frames the hooks call (ModTracker's `_get_mod_name` and the WeakKeyDictionary
    lookup inside it), once per module: the 9th block of a `fullgraph=True` model then failed with
    FailOnRecompileLimitHit, only while estimating (the full-size Qwen-Image plan's 32 blocks). While
    Dynamo traces a hook (is_compiling), it is traced as before."""
    import torch
    import torch._dynamo

    eager_pre = torch._dynamo.disable(mod_tracker._fw_pre_hook)
    eager_post = torch._dynamo.disable(mod_tracker._fw_post_hook)

    class EagerHooksModTracker(mod_tracker):
        def _fw_pre_hook(self, mod, input):
            if torch.compiler.is_compiling():
                return mod_tracker._fw_pre_hook(self, mod, input)
            return eager_pre(self, mod, input)

        def _fw_post_hook(self, mod, input, output):
            if torch.compiler.is_compiling():
                return mod_tracker._fw_post_hook(self, mod, input, output)
            return eager_post(self, mod, input, output)

    return EagerHooksModTracker


class Estimate(Report):
    """Context manager and result: `with torch_neuronx.estimate() as est: ...; est.summary()`.

    Eager ops are observed by a TorchDispatchMode (_mode.py), compiled graphs by the neuron
    compile backend (_graphs.py), collectives by the neuron process group (collectives.py).
    Per-module attribution uses torch.distributed._tools.mod_tracker.ModTracker.
    """

    def __init__(self, instance: str | None = None, lnc: int | None = None, *,
                 assumptions: dict | None = None, include_fake: bool = False,
                 strict: bool | None = None) -> None:
        from ..runtime import env

        super().__init__(hardware_of(resolve(instance, lnc), assumptions))
        self.include_fake = bool(include_fake)
        self.fuser = Fuser()   # this estimate's own run of fused eager ops (_eager.py)
        # strict: an op without a cost model raises instead of being listed (default: the env)
        self.strict = bool(env.parse_flag(env.ESTIMATE_STRICT)) if strict is None else bool(strict)
        self._suppress = 0
        self._mode = None
        self._tracker = None
        self.rank, self.world_size = _rank()

    # ---- context -------------------------------------------------------------
    def __enter__(self) -> "Estimate":
        from torch.distributed._tools.mod_tracker import ModTracker

        from ._mode import EstimateMode

        import warnings

        # ModTracker's global module hooks make torch.compile(module) warn on every call; they
        # are ours, not the user's, and fire only while estimating
        warnings.filterwarnings("ignore", message=r"Using `torch.compile\(module\)` when there are global hooks")
        if self._mode is not None:
            raise RuntimeError("this estimate is already collecting; create a new torch_neuronx.estimate()")
        self._tracker = _eager_hooks_tracker(ModTracker)()
        self._tracker.__enter__()
        recorders.push(self)
        self.fuser.boundary()
        self._mode = EstimateMode()    # the innermost estimate's mode costs for every recorder
        self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        recorders.pop(self)
        self._mode.__exit__(*exc)
        self._tracker.__exit__(*exc)
        self._mode = None

    # ---- recording (used by mode, graphs, collectives) -------------------------
    def _where(self) -> tuple[tuple, str]:
        t = self._tracker
        if t is None:
            return (), "forward"
        return tuple(t.parents), ("backward" if t.is_bw else "forward")

    def take_op(self, e, func, args, kwargs, out, device: int, host_sync: bool) -> None:
        """One eager op as the cost model costed it (recorders.py): laid out after this estimate's
        own fusion of eager ops; a host sync (a value read, a CPU fallback) drains the queue."""
        if host_sync:
            if e.bound != "none":
                self.record_op(e, device)
            self.host_sync(device)       # the queue drains; a print is a fusion boundary too
            self.fuser.boundary()
        elif e.bound != "none":
            self.record_op(self.fuser.apply(e, func, args, kwargs, out, device, self.hardware), device)

    def record_op(self, e, device: int) -> None:
        _publish_flops(device, e.flops)
        modules, phase = self._where()
        if not e.modelled:
            self.no_model(e.name)
        self.record("op", e.name, e.seconds, e.category, launch_s=e.launch_s, flops=e.flops,
                    nbytes=e.bytes, bound=e.bound, device=device, phase=phase, modules=modules,
                    detail={"roofline": (roofline_terms(e),)} if e.compute_s or e.memory_s else None)

    def no_model(self, name: str) -> None:
        """An op the cost model could not cost: listed in the report; an error when strict."""
        self.unmodelled.add(name)
        if self.strict:
            from ._formulas import UnmodelledOpError

            raise UnmodelledOpError(name)

    def record_graph(self, g, device: int, phase: str | None = None) -> None:
        _publish_flops(device, g.flops)
        for name in g.unmodelled:
            self.no_model(name)
        modules, here = self._where()
        self.record("graph", g.name, g.seconds, "graph", launch_s=g.launch_s, flops=g.flops,
                    nbytes=g.bytes, bound=g.bound, device=device, phase=phase or here,
                    modules=modules, detail={**g.breakdown(), "explain": g.explain(), "roofline": g.kernel_terms})

    def record_collective(self, c, device: int) -> None:
        modules, phase = self._where()
        self.record("collective", c.name, c.seconds, f"collective:{c.kind}", flops=0,
                    nbytes=c.bytes, bound=c.bound, device=device, phase=phase, modules=modules,
                    detail=c.as_detail())

    def critical_path(self, group=None) -> dict:
        """Across the ranks of `group` (call on every rank, after the `with` block): the estimated
        step time when ranks wait for each other at every collective.

        Each rank's stream is cut at its collectives; segment k ends when the slowest rank reaches
        collective k, which then takes its longest estimate. Returns critical_path_s, each rank's
        own total_s and how long each rank waits (wait_s).
        """
        import torch.distributed as dist

        mine = self._segments()
        if not (dist.is_available() and dist.is_initialized()):
            return {"critical_path_s": self.total_s, "total_s": [self.total_s], "wait_s": [0.0]}
        every: list = [None] * dist.get_world_size(group)
        dist.all_gather_object(every, mine, group=group)
        counts = {len(s["collectives"]) for s in every}
        if len(counts) != 1:
            raise RuntimeError(f"ranks recorded different numbers of collectives ({sorted(counts)}); "
                               "the critical path needs the same collectives on every rank")
        t = 0.0
        for k in range(counts.pop()):
            t += max(s["compute"][k] for s in every) + max(s["collectives"][k] for s in every)
        t += max(s["compute"][-1] for s in every)
        totals = [s["total_s"] for s in every]
        return {"critical_path_s": t, "total_s": totals, "wait_s": [t - x for x in totals]}

    def _segments(self) -> dict:
        compute, collectives, run = [], [], 0.0
        for e in self.events:
            if e.kind == "collective":
                compute.append(run)
                collectives.append(e.seconds)
                run = 0.0
            else:
                run += e.seconds
        compute.append(run)
        return {"compute": compute, "collectives": collectives, "total_s": self.total_s}

    def as_dict(self) -> dict:
        data = super().as_dict()
        data["rank"], data["world_size"] = self.rank, self.world_size
        return data


def _rank() -> tuple[int, int]:
    import os

    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except Exception:  # noqa: BLE001 - a rank is a label here, never a failure
        pass
    return int(os.environ.get("RANK", 0) or 0), int(os.environ.get("WORLD_SIZE", 1) or 1)


def estimate(instance: str | None = None, lnc: int | None = None, *, assumptions: dict | None = None,
             include_fake: bool = False, strict: bool | None = None) -> Estimate:
    """Collect estimated Trainium device time of the code run inside `with`.

    Args:
        instance: instance type, e.g. "trn3.48xlarge" (default TORCH_NEURONX_INSTANCE_TYPE).
        lnc: logical core size 1 or 2 (default NEURON_LOGICAL_NC_CONFIG, else the chip's default).
        assumptions: overrides of named assumptions, e.g. {"eager_launch_s": 20e-6}.
        include_fake: also estimate ops on FakeTensors (shape-only dry runs).
        strict: an op with no cost model (no FLOP formula, engine class or decomposition) raises
            UnmodelledOpError instead of being listed in the report (default
            TORCH_NEURONX_ESTIMATE_STRICT, else False).
    """
    return Estimate(instance, lnc, assumptions=assumptions, include_fake=include_fake, strict=strict)
