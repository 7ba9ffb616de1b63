"""Peak device memory and estimated time of a plan, and the OOM that ends it if it does not fit."""
from __future__ import annotations

import contextlib

import torch


class Region:
    """One plan on neuron:0: the peak HBM from `with region:` on, the estimated device time of
    what runs inside `region.timed()` (torch_neuronx.estimate, with marks into its event list),
    and the out-of-memory error if one stopped it (the region then ends quietly).

    In a dry run (the process's plan session, torch_neuronx.plan) the timed part is the session's
    named region `name`: one cost per op for the session's estimate and this one, one generate()
    wrapper, one step clock. Planned for real (--real) there is no session: the region times alone."""

    def __init__(self, layout, name: str = "plan"):
        from ...estimate import estimate
        from .._session import active

        self.capacity = self.capacity_bytes(layout)   # checks the runtime first
        self.est = estimate(layout.instance, layout.lnc, include_fake=True)
        self.name = name
        self.session = active()
        self.oom: str | None = None
        self.marks: dict[str, int] = {}

    def __enter__(self) -> "Region":
        torch.neuron.synchronize()
        torch.neuron.reset_peak_memory_stats(0)
        # what is already allocated is not this plan's: tensors an earlier plan in the same process
        # could not free (FSDP's autograd hooks keep a trained model's shards alive)
        self.baseline = torch.neuron.memory_allocated(0)
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None and issubclass(exc_type, torch.OutOfMemoryError):
            self.oom = str(exc)   # the same text a real run prints
            return True
        return False

    @contextlib.contextmanager
    def timed(self):
        if self.session is None:
            with self.est:
                yield self
        else:
            with self.session.region(self.name, self.est):
                yield self

    @contextlib.contextmanager
    def generate_calls(self):
        """The generate() wrapper that times calls made in `timed()` on this region: the session's
        one wrapper in a dry run, else one of the region's own for the `with` block."""
        if self.session is not None:
            yield self.session.generation
            return
        from .._generation import GenerateCalls

        calls = GenerateCalls(self.est)
        calls.start()
        try:
            yield calls
        finally:
            calls.stop()

    def unmodelled(self) -> list[str]:
        """The ops the plan's recording could not cost: in a dry run the session's estimate (the
        whole plan: building, warm-up, the timed region) with this region's; else this region's."""
        ops = set(self.est.unmodelled)
        if self.session is not None:
            ops |= self.session.estimate.unmodelled
        return sorted(ops)

    def mark(self, name: str) -> None:
        self.marks[name] = len(self.est.events)

    def seconds(self, start: int = 0, end: int | None = None) -> float:
        return sum(e.seconds for e in self.est.events[start:end])

    def flops(self, start: int = 0, end: int | None = None) -> int:
        return sum(e.flops for e in self.est.events[start:end])

    def _sum_by_category(self, field: str, start: int, end: int | None) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in self.est.events[start:end]:
            value = getattr(e, field)
            if value:
                out[e.category] = out.get(e.category, 0) + value
        return out

    def flops_by_category(self, start: int = 0, end: int | None = None) -> dict[str, int]:
        """FLOPs per category (matmul, attention, graph) of this core: the shapes its ops really ran."""
        return self._sum_by_category("flops", start, end)

    def bytes_by_category(self, start: int = 0, end: int | None = None) -> dict[str, int]:
        """HBM bytes per category this core's ops read and wrote (collectives: the bytes they move)."""
        return self._sum_by_category("bytes", start, end)

    def by_category(self, start: int = 0, end: int | None = None) -> dict[str, float]:
        out: dict[str, float] = {}
        for e in self.est.events[start:end]:
            out[e.category] = out.get(e.category, 0.0) + e.seconds - e.launch_s
            if e.launch_s:
                out["launch"] = out.get("launch", 0.0) + e.launch_s
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def roofline(self, start: int = 0, end: int | None = None) -> dict:
        """The events as roofline terms (estimate/roofline.py): what the same stretch would take with
        other matmul and HBM efficiencies (the calibration's fit reads it)."""
        from ...estimate.roofline import summarize

        return summarize(self.est.events[start:end])

    def collectives(self, start: int = 0, end: int | None = None) -> dict[str, dict]:
        """Per collective kind: calls, bytes and estimated seconds (dry-run process group only)."""
        out: dict[str, dict] = {}
        for e in self.est.events[start:end]:
            if e.kind == "collective":
                row = out.setdefault(e.category.split(":", 1)[-1], {"count": 0, "bytes": 0, "seconds": 0.0})
                row["count"] += 1
                row["bytes"] += e.bytes
                row["seconds"] += e.seconds
        return out

    @staticmethod
    def capacity_bytes(layout) -> int:
        """HBM of neuron:0 as this process's runtime has it (the allocator fails beyond it); the
        runtime must be the layout's instance and LNC, or the plan would be checked against another."""
        props = torch.neuron.get_device_properties(0)
        if props.instance_type != layout.instance or props.physical_cores != layout.lnc:
            raise RuntimeError(
                f"this process's neuron runtime is {props.instance_type} LNC={props.physical_cores}, the plan is for "
                f"{layout.instance} LNC={layout.lnc}: plan in a fresh process (python -m torch_neuronx.plan "
                f"generate/train set TORCH_NEURONX_INSTANCE_TYPE and NEURON_LOGICAL_NC_CONFIG before the "
                f"runtime starts)")
        return props.total_memory

    def peak_bytes(self) -> int:
        """The most this plan held at once on neuron:0 (beyond what was allocated when it started)."""
        return torch.neuron.max_memory_allocated(0) - self.baseline
