"""neuron-monitor: one JSON report per period, in neuron-monitor's schema
(docs/hardware-sources.md E), with what the virtual runtime knows.

What is virtual: error and hardware counters are zeros (nothing can fail in
hardware), per-execution latency is not measured (latency_stats is null), and
a logical core's physical halves (LNC=2, "v3d") report the logical core's
utilisation, since the virtual core does not split work between them.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time

from ..runtime.env import NeuronEnvironmentError
from .api import host
from .api.collector import ProcessRate, Sample, rates, take_sample
from .api.devices import DEVICE_TYPE, InstanceView, instance_view

DEFAULT_PERIOD_S = 5.0


class ConfigError(ValueError):
    pass


def parse_period(value) -> float:
    """'1s', '500ms', '2m' or a number of seconds."""
    if isinstance(value, (int, float)) and value > 0:
        return float(value)
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*", str(value))
    if not match or float(match.group(1)) <= 0:
        raise ConfigError(f"period {value!r} is not a duration; use e.g. \"1s\", \"500ms\" or \"2m\".")
    scale = {"ms": 1e-3, "s": 1.0, "m": 60.0, None: 1.0}[match.group(2)]
    return float(match.group(1)) * scale


def load_config(path: str | None) -> dict:
    if path is None:
        return {"period": f"{DEFAULT_PERIOD_S:g}s"}
    try:
        with open(path) as f:
            config = json.load(f)
    except OSError as err:
        raise ConfigError(f"cannot read the config file {path!r}: {err.strerror}") from None
    except json.JSONDecodeError as err:
        raise ConfigError(f"the config file {path!r} is not JSON: {err}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"the config file {path!r} must hold a JSON object such as {{\"period\": \"1s\"}}.")
    parse_period(config.get("period", DEFAULT_PERIOD_S))
    return config


def _runtime_report(view: InstanceView, rate: ProcessRate, period: float) -> dict:
    lnc_sub = view.core_version.endswith("d")
    in_use = {}
    mem_cores = {}
    for c in rate.cores:
        entry = {"neuroncore_utilization": round(c.utilization, 2), "flops": int(c.flops)}
        if lnc_sub:
            base = view.core_version[:-1]
            entry[view.core_version] = {f"nc_{base}.{i}": {"neuroncore_utilization": round(c.utilization, 2)}
                                        for i in range(view.lnc)}
        in_use[str(c.core)] = entry
        mem_cores[str(c.core)] = {"constants": 0, "model_code": 0, "model_shared_scratchpad": 0,
                                  "runtime_memory": c.reserved - c.allocated, "tensors": c.allocated}
    completed = sum(c.ops + c.graphs for c in rate.cores)
    rss = host.process_rss(rate.entry.pid)
    return {
        "neuroncore_counters": {"period": period, "neuroncores_in_use": in_use, "error": ""},
        "execution_stats": {
            "period": period,
            "error_summary": dict.fromkeys(("generic", "numerical", "transient", "model", "runtime", "hardware"), 0),
            "execution_summary": {"completed": completed, "completed_with_err": 0, "completed_with_num_err": 0,
                                  "timed_out": 0, "incorrect_input": 0, "failed_to_queue": 0},
            "latency_stats": {"total_latency": None, "device_latency": None},
            "error": ""},
        "memory_used": {
            "period": period,
            "neuron_runtime_used_bytes": {
                "host": rss, "neuron_device": sum(c.reserved for c in rate.cores),
                "usage_breakdown": {
                    "host": {"application_memory": rss, "constants": 0, "dma_buffers": 0, "tensors": 0},
                    "neuroncore_memory_usage": mem_cores}},
            "loaded_models": [], "error": ""},
        "neuron_runtime_vcpu_usage": {"period": period, "vcpu_usage": {
            "user": round(rate.cpu_user, 2), "system": round(rate.cpu_system, 2)}, "error": ""},
    }


def build_report(view: InstanceView, before: Sample, after: Sample) -> dict:
    period = round(after.time - before.time, 3)
    runtimes = [{"pid": r.entry.pid, "address": "", "neuron_runtime_tag": str(r.entry.pid), "error": "",
                 "report": _runtime_report(view, r, period)} for r in rates(before, after)]
    usage = host.cpu_usage(before.cpu, after.cpu)
    switches = after.cpu.get("ctxt", (0,))[0] - before.cpu.get("ctxt", (0,))[0]
    chip = view.instance.chip
    device_type, device_version = DEVICE_TYPE.get(chip.name, (chip.name, ""))
    return {
        "neuron_runtime_data": runtimes,
        "system_data": {
            "neuron_hw_counters": {"period": period, "neuron_devices": [
                {"neuron_device_index": c.index, "mem_ecc_corrected": 0, "mem_ecc_uncorrected": 0,
                 "sram_ecc_uncorrected": 0, "sram_ecc_corrected": 0} for c in view.chips], "error": ""},
            "vcpu_usage": {"period": period, "average_usage": usage.get("all", {}),
                           "usage_data": {k: v for k, v in usage.items() if k != "all"},
                           "context_switch_count": switches, "error": ""},
            "memory_info": {"period": period, **host.memory_info(), "error": ""},
        },
        "instance_info": {"instance_name": "", "instance_id": view.instance_id, "instance_type": view.instance_type,
                          "instance_availability_zone": "virtual", "instance_availability_zone_id": "virtual",
                          "instance_region": "virtual", "ami_id": "", "subnet_id": "", "error": ""},
        "neuron_hardware_info": {
            "neuron_device_type": device_type, "neuron_device_version": device_version,
            "neuroncore_version": view.core_version, "neuron_device_count": len(view.chips),
            "neuron_device_memory_size": view.chips[0].memory_bytes if view.chips else 0,
            "neuroncore_per_device_count": view.cores_per_chip, "logical_neuroncore_config": view.lnc,
            "error": ""},
    }


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="neuron-monitor", description="Print a JSON report of the (virtual) "
                                "Neuron runtime and system metrics once per period.")
    p.add_argument("-c", "--config-file", help='JSON config, e.g. {"period": "1s"} (default period 5s)')
    p.add_argument("-n", "--count", type=int, default=0,
                   help="stop after this many reports (torch-neuronx extension; default: run until killed)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args.config_file)
        period = parse_period(config.get("period", DEFAULT_PERIOD_S))
        view = instance_view()
    except (ConfigError, NeuronEnvironmentError) as err:
        print(f"neuron-monitor: {err}", file=sys.stderr)
        return 1
    if args.count < 0:
        print("neuron-monitor: --count must be >= 0", file=sys.stderr)
        return 1
    before = take_sample()
    reports = 0
    try:
        while args.count == 0 or reports < args.count:
            time.sleep(period)
            after = take_sample()
            print(json.dumps(build_report(view, before, after)), flush=True)
            before, reports = after, reports + 1
    except (KeyboardInterrupt, BrokenPipeError):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
