"""Rates from two samples of the registry: per-core utilisation and FLOP/s,
per-process CPU use. neuron-top and neuron-monitor both use this."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from . import host
from .registry import ProcessEntry, list_processes


@dataclass
class Sample:
    time: float
    processes: dict[int, ProcessEntry]
    cpu: dict
    process_cpu: dict[int, tuple[float, float]] = field(default_factory=dict)


def take_sample(directory: Path | None = None) -> Sample:
    entries = {e.pid: e for e in list_processes(directory)}
    cpu_of = {pid: host.process_cpu_seconds(pid) for pid in entries}
    return Sample(time=time.monotonic(), processes=entries, cpu=host.cpu_times(),
                  process_cpu={p: c for p, c in cpu_of.items() if c is not None})


@dataclass
class CoreRate:
    """One logical core as one process uses it, over the sampling period."""
    pid: int
    local: int          # neuron:<local> in that process
    core: int           # instance-wide logical core id
    utilization: float  # percent of the period the core executed ops
    flops: float        # estimated FLOP/s (0 without estimates)
    ops: int            # ops executed in the period
    graphs: int
    period: float       # seconds between the samples
    allocated: int
    allocated_peak: int
    reserved: int


@dataclass
class ProcessRate:
    entry: ProcessEntry
    cores: list[CoreRate]
    cpu_user: float     # percent of one CPU
    cpu_system: float


def rates(before: Sample, after: Sample) -> list[ProcessRate]:
    """Per-process rates between two samples; a process absent from `before` is measured from zero."""
    period = max(after.time - before.time, 1e-9)
    out = []
    for pid, entry in after.processes.items():
        old = before.processes.get(pid)
        cores = []
        for local, fields in sorted(entry.devices.items()):
            prev = old.devices.get(local, {}) if old else {}
            busy = fields["busy_ns"] - prev.get("busy_ns", 0)
            cores.append(CoreRate(
                pid=pid, local=local, core=entry.global_core(local),
                utilization=min(100.0, max(0.0, 100.0 * busy / 1e9 / period)),
                flops=max(0, fields["estimated_flops"] - prev.get("estimated_flops", 0)) / period,
                ops=fields["ops"] - prev.get("ops", 0), graphs=fields["graphs"] - prev.get("graphs", 0),
                period=period,
                allocated=fields["allocated"], allocated_peak=fields["allocated_peak"],
                reserved=fields["reserved"]))
        cpu_now, cpu_old = after.process_cpu.get(pid), before.process_cpu.get(pid)
        user = system = 0.0
        if cpu_now and cpu_old:
            user = 100.0 * (cpu_now[0] - cpu_old[0]) / period
            system = 100.0 * (cpu_now[1] - cpu_old[1]) / period
        out.append(ProcessRate(entry=entry, cores=cores, cpu_user=user, cpu_system=system))
    return out
