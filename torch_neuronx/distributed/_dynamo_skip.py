"""Dynamo runs the neuron process group's Python code eagerly, as it runs gloo's and NCCL's C++.

ProcessGroupNeuron is a Python subclass of `dist.ProcessGroup`: C++ callers (DDP's buffer broadcast
`dist._broadcast_coalesced` in `_pre_forward`, its reducer, functional collectives) reach our methods
through the pybind trampoline, as new Python frames. Inside `torch.compile`, Dynamo's frame callback is
still set while DDP's own (skipped) code runs, so it tried to compile `ProcessGroupNeuron.broadcast` as a
frame of its own, where `self` is a ProcessGroup, an opaque object to Dynamo, and failed with
"UnsafeScriptObjectError ... Member '_verify' is not registered" (also with `backend="eager"`). The
transport is not something to trace: it moves bytes, like the C++ process groups whose frames Dynamo never
sees. So this package's files join Dynamo's skip list (`torch._dynamo.trace_rules.add`), when Dynamo is
imported: a program that never compiles never imports it.
"""
from __future__ import annotations

from .._torch_versions import require
from . import hooks

_PACKAGE = __package__  # torch_neuronx.distributed
# The torch minors whose torch._dynamo.trace_rules.add this was checked against.
WRITTEN_FOR = ("2.13", "2.14", "2.15")


def _skip(trace_rules) -> None:
    trace_rules.add(_PACKAGE)


def install() -> None:
    # Checked when the process group module loads (a neuron group is created), not inside the import hook.
    require("torch_neuronx.distributed._dynamo_skip.install (adds to torch._dynamo.trace_rules)", WRITTEN_FOR)
    hooks.when_imported("torch._dynamo.trace_rules", _skip)   # the watcher the integrations register
