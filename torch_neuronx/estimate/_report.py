"""The result of `torch_neuronx.estimate()`: events in stream order, totals and breakdowns."""
from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field

from ..runtime import units


@dataclass
class Event:
    """One estimated device activity, laid out in stream order on its logical core."""
    kind: str            # "op" | "graph" | "collective"
    name: str
    seconds: float
    category: str        # matmul, attention, elementwise, reduction, copy, collective:<kind>, graph
    launch_s: float
    flops: int
    bytes: int
    bound: str
    device: int
    start_s: float       # on this device's estimated timeline
    phase: str           # "forward" | "backward"
    modules: tuple = ()
    detail: dict = field(default_factory=dict)


class Report:
    """Totals and breakdowns over recorded events (the base of Estimate)."""

    def __init__(self, hw) -> None:
        self.hardware = hw
        self.events: list[Event] = []
        self._clock: dict[int, float] = defaultdict(float)   # device stream: when it is next free
        self._host: dict[int, float] = defaultdict(float)    # when the host has enqueued the last launch
        self.unmodelled: set[str] = set()

    # ---- recording ---------------------------------------------------------
    def record(self, kind, name, seconds, category, *, launch_s=0.0, flops=0, nbytes=0, bound="",
               device=0, phase="forward", modules=(), detail=None) -> Event:
        """Lay out one activity of `seconds` (its `launch_s` included) on its device's stream.

        Asynchronous execution (assumption eager_async): the host enqueues each launch as soon as
        the previous one is enqueued, so a launch overlaps the device work queued before it and
        only the device's idle wait for it counts; it is then recorded as the event's launch_s."""
        start = self._clock[device]
        if self.hardware.assumptions.eager_async and launch_s > 0:
            body = seconds - launch_s
            ready = self._host[device] + launch_s
            self._host[device] = ready
            launch_s = max(0.0, ready - start)     # the device idles until the launch is done
            seconds = launch_s + body
        self._clock[device] = start + seconds
        ev = Event(kind, name, seconds, category, launch_s, int(flops), int(nbytes), bound, device,
                   start, phase, tuple(modules), detail or {})
        self.events.append(ev)
        return ev

    def host_sync(self, device: int = 0) -> None:
        """The host waits for `device`'s queue to drain (.item(), a copy to the host): the next
        launch can no longer overlap queued work."""
        self._host[device] = max(self._host[device], self._clock[device])

    # ---- totals ----------------------------------------------------------
    @property
    def total_s(self) -> float:
        """Estimated device time: the busiest logical core's stream (ops run in stream order)."""
        return max(self._clock.values(), default=0.0)

    @property
    def flops(self) -> int:
        return sum(e.flops for e in self.events)

    @property
    def mfu(self) -> float:
        """Model FLOPs / (estimated elapsed time x bf16 TensorEngine peak of one logical core)."""
        total = self.total_s
        return self.flops / (total * self.hardware.peak_flops_bf16) if total > 0 else 0.0

    # ---- breakdowns --------------------------------------------------------
    def by_category(self) -> dict[str, float]:
        """Seconds per category; launch overhead is its own entry, so the values sum to the total
        over all devices."""
        out: dict[str, float] = defaultdict(float)
        for e in self.events:
            out[e.category] += e.seconds - e.launch_s
            if e.launch_s:
                out["launch"] += e.launch_s
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def by_module(self) -> dict[str, dict[str, float]]:
        """Seconds per nn.Module path, forward and backward (an op counts for every enclosing module)."""
        out: dict[str, dict[str, float]] = {}
        for e in self.events:
            for m in e.modules:
                row = out.setdefault(m, {"forward": 0.0, "backward": 0.0})
                row[e.phase] += e.seconds
        return out

    def by_op(self) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for e in self.events:
            row = out.setdefault(e.name, {"count": 0, "seconds": 0.0, "flops": 0, "bytes": 0,
                                          "category": e.category})
            row["count"] += 1
            row["seconds"] += e.seconds
            row["flops"] += e.flops
            row["bytes"] += e.bytes
        return dict(sorted(out.items(), key=lambda kv: -kv[1]["seconds"]))

    def by_kind(self) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        for e in self.events:
            out[e.kind] += e.seconds
        return dict(out)

    # ---- output --------------------------------------------------------------
    def as_dict(self) -> dict:
        return {"hardware": self.hardware.describe(), "total_s": self.total_s, "flops": self.flops,
                "mfu": self.mfu, "by_category": self.by_category(), "by_module": self.by_module(),
                "by_op": self.by_op(), "unmodelled_ops": sorted(self.unmodelled),
                "assumptions": asdict(self.hardware.assumptions),
                "events": [asdict(e) for e in self.events]}

    def to_json(self, path: str | None = None, *, events: bool = True) -> str:
        data = self.as_dict()
        if not events:
            data.pop("events")
        text = json.dumps(data, indent=1)
        if path is not None:
            with open(path, "w") as f:
                f.write(text)
        return text

    def summary(self, top: int = 10) -> str:
        """A short table in the manner of torch.cuda.memory_summary."""
        total = self.total_s
        lines = [f"Estimated Trainium time on {self.hardware.name} (one logical core): "
                 f"{units.seconds(total)}, {len(self.events)} events, {self.flops / 1e9:.3g} GFLOP, "
                 f"MFU {100 * self.mfu:.1f}% of {self.hardware.peak_flops_bf16 / 1e12:.0f} TFLOPS bf16"]
        lines.append(f"{'category':<28}{'time':>12}{'share':>8}")
        cats = self.by_category()
        whole = sum(cats.values()) or 1.0
        for k, v in cats.items():
            lines.append(f"{k:<28}{units.seconds(v):>12}{100 * v / whole:>7.1f}%")
        lines.append(f"{'top ops':<40}{'calls':>7}{'time':>12}")
        for name, row in list(self.by_op().items())[:top]:
            lines.append(f"{name[:39]:<40}{row['count']:>7}{units.seconds(row['seconds']):>12}")
        mods = self.by_module()
        if mods:
            lines.append(f"{'module':<40}{'forward':>12}{'backward':>12}")
            for name, row in sorted(mods.items(), key=lambda kv: -sum(kv[1].values()))[:top]:
                lines.append(f"{name[:39]:<40}{units.seconds(row['forward']):>12}{units.seconds(row['backward']):>12}")
        seen = set()
        for e in self.events:
            if e.kind == "graph" and e.name not in seen:
                seen.add(e.name)
                lines.append("compiled " + e.detail.get("explain", e.name))
        if self.unmodelled:
            lines.append("no cost model (counted as Vector-engine ops): " + ", ".join(sorted(self.unmodelled)))
        lines.append("(estimates from the documented model in docs/estimate.md, not measurements)")
        return "\n".join(lines)
