"""Reading and trimming an exported Chrome trace's estimated device track.

`prof.export_chrome_trace(path)` writes Kineto's Chrome trace JSON: CPU ops on
the process's pid, and the estimated device kernels as `"cat": "kernel"`
events whose pid is the logical core index and whose tid is the stream.
"""
from __future__ import annotations

import json
from collections import defaultdict

DEVICE_CATEGORY = "kernel"


def load(path: str) -> dict:
    with open(path) as f:
        trace = json.load(f)
    if isinstance(trace, list):  # the bare-array form is valid Chrome trace JSON too
        trace = {"traceEvents": trace}
    return trace


def device_events(trace: dict) -> list[dict]:
    """The estimated device kernels, in the trace's order."""
    return [e for e in trace["traceEvents"] if e.get("cat") == DEVICE_CATEGORY and e.get("ph") == "X"]


def cpu_ops(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op" and e.get("ph") == "X"]


def track_names(trace: dict) -> dict[int, str]:
    """pid -> process name, as a trace viewer labels each track."""
    return {
        e["pid"]: e["args"]["name"]
        for e in trace["traceEvents"]
        if e.get("ph") == "M" and e.get("name") == "process_name"
    }


def filter_device_events(path: str, config) -> None:
    """Apply NeuronConfig's core selection and event cap to the trace at `path`."""
    if config.device_track and config.cores is None and config.max_events_per_nc is None:
        return
    trace = load(path)
    kept_per_core: dict[int, int] = defaultdict(int)
    events = []
    for e in trace["traceEvents"]:
        if e.get("cat") == DEVICE_CATEGORY:
            core = e.get("pid")
            if not config.device_track or (config.cores is not None and core not in config.cores):
                continue
            if config.max_events_per_nc is not None and kept_per_core[core] >= config.max_events_per_nc:
                continue
            kept_per_core[core] += 1
        events.append(e)
    trace["traceEvents"] = events
    with open(path, "w") as f:
        json.dump(trace, f)
