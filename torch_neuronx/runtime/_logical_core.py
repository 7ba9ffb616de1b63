"""Which logical NeuronCore is modelled: the one resolver of instance type and LNC.

One rule for the runtime, the tools, the cost model and the planner: an explicit argument wins,
else TORCH_NEURONX_INSTANCE_TYPE / NEURON_LOGICAL_NC_CONFIG, else trn2.3xlarge and the chip's
default LNC (2 on trn2/trn3, 1 on trn1). An LNC the chip does not have is an error wherever it
came from (docs/virtual-runtime.md: "1 only on trn1"); the message is neuron_hardware's one wording,
naming the argument or variable that holds the bad value.
"""
from __future__ import annotations

import neuron_hardware
from neuron_hardware import HardwareChoiceError, LogicalCoreView

from . import env


def resolve(instance: str | None = None, lnc: int | None = None, *, instance_arg: str = "instance",
            lnc_arg: str = "lnc") -> LogicalCoreView:
    """The logical core of `instance` at `lnc`, each defaulting to its environment variable.

    `instance_arg` / `lnc_arg` are the names the caller's user wrote (an argument such as
    "instance_type", or a flag such as "--instance"), so a bad value's message names them.
    Raises HardwareChoiceError (a ValueError) for a bad argument, NeuronEnvironmentError (as every
    bad variable of the runtime) when the bad value came from the environment: the same words.
    """
    instance_from, lnc_from = instance_arg, lnc_arg
    if instance is None:
        instance, instance_from = env.get(env.INSTANCE_TYPE), env.INSTANCE_TYPE
        if instance is None:
            instance = neuron_hardware.DEFAULT_INSTANCE_TYPE
    if lnc is None:
        lnc, lnc_from = env.parse_int(env.LOGICAL_NC_CONFIG, minimum=1), env.LOGICAL_NC_CONFIG
    try:
        return neuron_hardware.logical_core_view(instance, lnc, instance_from=instance_from, lnc_from=lnc_from)
    except HardwareChoiceError as err:
        if err.source in (env.INSTANCE_TYPE, env.LOGICAL_NC_CONFIG):
            raise env.NeuronEnvironmentError(str(err)) from None
        raise


def hbm_bytes_per_core(view: LogicalCoreView) -> int:
    """HBM capacity of each logical core of this process: TORCH_NEURONX_HBM_BYTES_PER_CORE, else the chip's share."""
    override = env.parse_bytes(env.HBM_BYTES_PER_CORE)
    return view.hbm_bytes if override is None else override
