"""What a CPU-fallback op costs on Trainium: it does not run on the device at all.

TorchNeuron runs an op whose row in the op-support table (torch_neuronx/ops_support,
docs/op-support.md) is CPU_FALLBACK on the host CPU: "the named ATen operator runs on the CPU and
the result is copied back to the Neuron device". So instead of its device roofline it costs

    host_sync_s                                   the host waits for the op's inputs (a sync)
  + bytes of its neuron inputs  / host_link_bytes_per_s     device-to-host copies
  + cpu_fallback_op_s + (inputs + outputs) / host_memory_bytes_per_s     the CPU op
  + bytes of its neuron outputs / host_link_bytes_per_s     host-to-device copies

(all named assumptions, estimate/assumptions.py; bytes as the device roofline counts them,
broadcast dimensions once). An in-place op's output is its input: copied both ways. The device
idles meanwhile: the next op is enqueued only when the host has the result.
"""
from __future__ import annotations

import torch

from .. import ops_support
from . import _formulas as formulas
from .hardware import Hardware
from ._ops import OpEstimate

CATEGORY = "cpu_fallback"


def _on_device(t: torch.Tensor) -> bool:
    """Tensors the copies move: neuron tensors (and a shape-only run's fake ones), not CPU scalars."""
    return t.device.type in ("neuron", "privateuseone") or isinstance(t, torch._subclasses.FakeTensor)


def link_bytes(args, kwargs, out) -> tuple[int, int]:
    """(bytes copied device-to-host, bytes copied host-to-device) for one fallback call."""
    d2h = sum(formulas.touched_bytes(t) for t in formulas.tensors((args, kwargs)) if _on_device(t))
    h2d = sum(formulas.touched_bytes(t) for t in formulas.tensors(out) if _on_device(t))
    return d2h, h2d


def fallback_seconds(d2h: int, h2d: int, hw: Hardware) -> tuple[float, float]:
    """(host-link seconds, host seconds incl. the sync) of a fallback moving d2h and h2d bytes."""
    a = hw.assumptions
    link_s = (d2h + h2d) / a.host_link_bytes_per_s
    host_s = a.host_sync_s + a.cpu_fallback_op_s + (d2h + h2d) / a.host_memory_bytes_per_s
    return link_s, host_s


def charge(func, args, kwargs, out, hw: Hardware) -> OpEstimate | None:
    """The fallback cost of one call of a CPU_FALLBACK op; None for any other op (it runs on the device)."""
    if formulas.is_view(func) or func.namespace in formulas.NO_DEVICE_NAMESPACES:
        return None                  # metadata only, or not device work: nothing to copy
    row = ops_support.classify_call(func, args, kwargs, out)
    if row.status != ops_support.CPU_FALLBACK:
        return None
    d2h, h2d = link_bytes(args, kwargs, out)
    link_s, host_s = fallback_seconds(d2h, h2d, hw)
    return OpEstimate(formulas.op_name(func), link_s + host_s, "host", CATEGORY, 0, d2h + h2d, "host",
                      compute_s=host_s, memory_s=link_s, launch_s=0.0,
                      dtype=",".join(ops_support.dtype_names(args, kwargs, out)))
