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

from . import formulas

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


class Fuser:
    """Runs of consecutive elementwise ops on one device fuse: one launch for the run, and a tensor
    the previous op of the run produced is neither written back nor read again."""

    def __init__(self) -> None:
        self.device = None
        self.produced: set = set()

    def boundary(self) -> None:
        self.device = None
        self.produced = set()

    def apply(self, e, func, args, kwargs, out, device: int, hw):
        """`e` as one member of a fused run (or `e` itself, starting a run or breaking one)."""
        fusible = e.category == "elementwise" and e.engine in ("vector", "scalar")
        if not fusible or not hw.assumptions.eager_fusion or torch.are_deterministic_algorithms_enabled():
            self.boundary()
            return e
        ins = formulas.tensors((args, kwargs))
        outs = [_key(t) for t in formulas.tensors(out)]
        if self.device != device or not self.produced:
            self.device, self.produced = device, set(outs)
            return e
        saved = sum(2 * formulas.touched_bytes(t) for t in ins if _key(t) in self.produced)
        self.produced = set(outs)
        if not saved and e.launch_s == 0:
            return e
        nbytes = max(0, e.bytes - saved)
        memory_s = nbytes / (hw.hbm_bytes_per_s * hw.assumptions.hbm_efficiency)
        body = max(e.compute_s, memory_s)
        bound = "compute" if e.compute_s >= memory_s else "memory"
        return replace(e, seconds=body, bytes=nbytes, memory_s=memory_s, launch_s=0.0, bound=bound)
