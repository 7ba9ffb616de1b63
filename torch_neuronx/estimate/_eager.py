"""TorchNeuron's eager execution as the estimate sees it: host syncs and Adaptive Eager fusion.

TorchNeuron enqueues eager ops asynchronously and synchronizes on device-to-host copies and value
access; Adaptive Eager Execution fuses runs of queued ops into single ops, with printing (a copy
to the host) as a fusion boundary and deterministic mode turning it off (AWS Neuron docs,
frameworks/torch/pytorch-native-overview). The asynchronous timeline is Report.record's; this
module finds the syncs and applies the fusion assumption (assumption eager_fusion) to one op.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from . import _formulas as formulas

aten = torch.ops.aten
_TO_HOST = {aten._to_copy.default, aten.copy_.default}


def is_host_sync(func, args, kwargs, out) -> bool:
    """Does this op make the host wait for the device: a value read or a copy to the host?"""
    if func is aten._local_scalar_dense.default:
        return True
    if func in _TO_HOST:
        dst = args[0] if func is aten.copy_.default else out
        return isinstance(dst, torch.Tensor) and dst.device.type == "cpu"
    return False


def _key(t: torch.Tensor):
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):
        return None


def _fusible(e, func, out, device_type) -> bool:
    """Elementwise and reduction work on the Vector/Scalar engines, and dtype casts on the device
    (what a loop fusion takes: a reduction consumes its producers' loop); not matmuls, not
    data movement such as cat or an indexed copy."""
    if e.engine in ("vector", "scalar") and e.category in ("elementwise", "reduction"):
        return True
    if func is aten._to_copy.default:
        outs = formulas.tensors(out)
        return bool(outs) and outs[0].device.type == device_type
    return False


class Fuser:
    """Runs of consecutive elementwise ops on one device fuse (reductions and device-side casts
    join a run): one launch for the run; a tensor the previous op of the run produced is neither
    written back nor read again, and one an earlier op of the run produced is not read again."""

    def __init__(self) -> None:
        self.device = None
        self.last: set = set()       # outputs of the previous op of the run
        self.produced: set = set()   # outputs of every op of the run

    def boundary(self) -> None:
        self.device = None
        self.last, self.produced = set(), set()

    def apply(self, e, func, args, kwargs, out, device: int, hw):
        """`e` as one member of a fused run (or `e` itself, starting a run or breaking one)."""
        ins = formulas.tensors((args, kwargs))
        device_type = ins[0].device.type if ins else "neuron"
        if (not _fusible(e, func, out, device_type) or not hw.assumptions.eager_fusion
                or torch.are_deterministic_algorithms_enabled()):
            self.boundary()
            return e
        outs = {_key(t) for t in formulas.tensors(out)}
        if self.device != device or not self.produced:
            self.device, self.last, self.produced = device, outs, set(outs)
            return e
        saved = 0
        for t in ins:
            k = _key(t)
            if k in self.last:
                saved += 2 * formulas.touched_bytes(t)     # neither written back nor read again
            elif k in self.produced:
                saved += formulas.touched_bytes(t)         # still on chip: not read again
        self.last = outs
        self.produced |= outs
        if not saved and e.launch_s == 0:
            return e
        nbytes = max(0, e.bytes - saved)
        memory_s = nbytes / (hw.hbm_bytes_per_s * hw.assumptions.hbm_efficiency)
        body = max(e.compute_s, memory_s)
        bound = "compute" if e.compute_s >= memory_s else "memory"
        return replace(e, seconds=body, bytes=nbytes, memory_s=memory_s, launch_s=0.0, bound=bound)
