"""A distributed accelerate worker stops when its NeuronCores are misconfigured, instead of training alone on CPU.

An invalid neuron environment (e.g. `accelerate launch --gpu_ids 5,9`, which accelerate exports as
`NEURON_RT_VISIBLE_CORES=5,9`, on an instance with 4 cores) leaves the device unavailable with only a
warning, so that `import torch` never fails. accelerate's `PartialState` then finds no accelerator and, without
`--cpu`, sets `DistributedType.NO` and `num_processes=1` in every rank: N copies of a one-process CPU run that
each believe they are alone, with no error. This adapter raises instead, in `PartialState.__init__`, when the
process is one of several (WORLD_SIZE > 1), CPU was not asked for, and the neuron runtime reported an
environment error; the message is the runtime's (it names the variable) plus what to change.
"""
from __future__ import annotations

import os

from .._wrap import wrap_once


def _check(cpu: bool) -> None:
    if int(os.environ.get("WORLD_SIZE", "1") or 1) <= 1 or cpu:
        return
    if os.environ.get("ACCELERATE_USE_CPU", "false").lower() in ("1", "true", "yes"):
        return
    from torch_neuronx import runtime

    error = runtime.error()
    if error is not None:
        raise runtime.env.NeuronEnvironmentError(
            f"This is one of {os.environ['WORLD_SIZE']} accelerate/torchrun processes, but the neuron device is "
            f"unavailable: {error} Fix --gpu_ids / gpu_ids in the accelerate config (exported as "
            f"{runtime.env.VISIBLE_CORES}) or the variable named, or pass --cpu to train on CPU on purpose.")


def patch(module) -> None:
    """Wrap `accelerate.state.PartialState.__init__`."""
    def make(original):
        def __init__(self, cpu: bool = False, **kwargs):
            if not self.__class__._shared_state:  # the first PartialState of the process decides the setup
                _check(cpu)
            original(self, cpu=cpu, **kwargs)

        return __init__

    wrap_once(module.PartialState, "__init__", make)
