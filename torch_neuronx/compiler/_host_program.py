"""Which compiled graphs run as host programs (csrc/host_program.cpp), and the lines that make them one.

The program Inductor generates for neuron is its CPU program with neuron buffers. When every tensor
the graph takes and returns lives on one neuron core and the program names no device and calls no
op outside ATen, the whole program can run on host views of that core's memory: inputs become CPU
aliases once, buffers are CPU tensors over counted device blocks, outputs become neuron tensors once.
The extern kernels (matmuls, attention) are then the CPU's own calls, with no bridge crossing each.

Everything else keeps the neuron program: graphs mixing devices or cores, programs that create
tensors on a named device, random ops (the core's generator must draw them), ATen ops without a CPU
kernel, ATen ops whose neuron kernel computes what the CPU's cannot (MXFP8 `_scaled_mm`), collectives,
custom or higher-order ops, dry runs (their kernels do not run). TORCH_NEURONX_COMPILED_HOST_PROGRAM=0 turns it off for graphs compiled after.
"""
from __future__ import annotations

import os
import re

ENV = "TORCH_NEURONX_COMPILED_HOST_PROGRAM"
DEVICE = "neuron"

# Op namespaces a host program may call: ATen's CPU kernels and Inductor's own helpers.
_ALLOWED_NAMESPACES = {"aten", "inductor"}
_OP_NAMESPACE = re.compile(r"torch\.ops\.(\w+)\.")
# A device named in the program creates tensors there (seeds, factories): not a host program.
_NAMED_DEVICE = re.compile(r"device\(type=|device=['\"]|empty_strided_cpu\(|empty_strided\(|\.to\(|\.cpu\(")
# ATen calls of the program (`aten.randint.low_out(`, `torch.ops.aten.sort.default(`).
_ATEN_CALL = re.compile(r"\baten\.(\w+)\.(\w+)\(")
# Ops that draw from a generator: on host views they would draw from the CPU's, not the core's.
_RANDOM = re.compile(r"rand|normal|bernoulli|uniform|exponential|multinomial|dropout|poisson|random|cauchy|"
                     r"geometric|seed")


def _runs_on_host(name: str, overload: str) -> bool:
    """An ATen op the program calls has a CPU kernel and draws no random numbers."""
    import torch

    if _RANDOM.search(name) or "overrideable" in name:   # the latter: a backend hook whose CPU kernel raises
        return False

    qualified = f"aten::{name}" + ("" if overload == "default" else f".{overload}")
    try:
        return torch._C._dispatch_has_computed_kernel_for_dispatch_key(qualified, "CPU")
    except RuntimeError:   # not an operator name after all
        return False


def _low_precision_gemm_converts() -> bool:
    from ..runtime import host_gemm

    return bool(host_gemm.fp32_dtypes())


def enabled() -> bool:
    value = os.environ.get(ENV, "1").strip().lower()
    if value not in ("0", "1", "true", "false", "on", "off", "yes", "no"):
        raise ValueError(f"{ENV}={os.environ.get(ENV)!r}: use 1 (compiled graphs run as host programs, the "
                         "default) or 0 (every extern kernel crosses the neuron/host bridge)")
    return value in ("1", "true", "on", "yes")


def _device_of(node):
    try:
        return node.get_device()
    except Exception:  # noqa: BLE001 - symbolic outputs and constants have no device
        return None


def plan(graph, body: str) -> tuple[int, tuple[bool, ...]] | None:
    """(core, neuron_outputs) when the graph being generated can run as a host program, else None.
    `graph` is Inductor's GraphLowering, `body` the program's text so far."""
    from . import hooks

    if hooks.compile_overrides.active() is not None or not enabled():   # a dry run's kernels do not run
        return None
    cores = set()
    for value in graph.graph_inputs.values():
        device = _device_of(value)
        if device is None:
            continue
        if device.type != DEVICE:
            return None
        cores.add(device.index or 0)
    outputs = []
    for node in graph.graph_outputs:
        device = _device_of(node)
        if device is not None and device.type != DEVICE:
            return None
        if device is not None:
            cores.add(device.index or 0)
        outputs.append(device is not None)
    if len(cores) != 1:
        return None
    call = body[body.find("def call("):] if "def call(" in body else body
    if _NAMED_DEVICE.search(call) or any(ns not in _ALLOWED_NAMESPACES for ns in _OP_NAMESPACE.findall(call)):
        return None
    if not all(_runs_on_host(name, overload) for name, overload in set(_ATEN_CALL.findall(call))):
        return None
    if "_scaled_mm" in call:
        return None   # its neuron kernels run MXFP8 (e8m0 block scales), which torch's CPU kernels reject
    if "_grouped_mm(" in call and _low_precision_gemm_converts():
        return None   # its neuron kernel follows the host GEMM policy (runtime/host_gemm.py); the CPU's would not
    return cores.pop(), tuple(outputs)


def footer(core: int, neuron_outputs: tuple[bool, ...]) -> list[str]:
    """Module lines after `call` is defined: buffers become host blocks, `call` the host program."""
    return [
        "# A host program (torch_neuronx/compiler/_host_program.py): buffers are CPU views of device blocks,",
        "# inputs and outputs cross to and from the neuron device once per call.",
        "empty_strided_neuron = __import__('torch_neuronx')._C._empty_strided_host",
        f"call = __import__('torch_neuronx')._C._host_program(call, {core}, {neuron_outputs!r})",
    ]
