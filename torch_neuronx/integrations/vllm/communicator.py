"""Tensor-parallel collectives of vLLM on neuron: torch.distributed over the c10d backend `neuron`.

vLLM's base communicator already issues every collective on the device group, which vLLM creates with the
platform's `dist_backend` ("neuron"), so neuron tensors go through `ProcessGroupNeuron` (and, in a dry run
or an estimate, through the cost model's observers) rather than vLLM's CPU shared-memory all-reduce.
"""
from __future__ import annotations

from vllm.distributed.device_communicators.base_device_communicator import DeviceCommunicatorBase


class NeuronCommunicator(DeviceCommunicatorBase):
    pass
