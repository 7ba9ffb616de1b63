"""`NeuronPlatform`: vLLM's CPU platform with the device, memory, process group and worker of neuron.

It stays a CPU platform for vLLM's kernel and attention selection (`is_cpu()`): the virtual NeuronCore runs
ATen and vLLM's CPU custom ops on device memory through the PrivateUse1 fallback, so vLLM's CPU attention,
rotary, KV-cache and sampling kernels are the ones that run. What changes is where tensors live
(`neuron:<local rank>`), how the KV cache is sized (`torch.neuron.mem_get_info()`), which process group
tensor parallelism uses (c10d backend `neuron`) and the features refused at start-up (`_features`).
"""
from __future__ import annotations

import os

import torch
from vllm.logger import init_logger
from vllm.platforms.cpu import CpuPlatform

from ._features import reject_unsupported

logger = init_logger(f"vllm.{__name__}")  # under vLLM's logger, so its handler prints it

WORKER = "torch_neuronx.integrations.vllm.worker.NeuronWorker"
COMMUNICATOR = "torch_neuronx.integrations.vllm.communicator.NeuronCommunicator"


class NeuronPlatform(CpuPlatform):
    device_name: str = "neuron"
    device_type: str = "neuron"
    dispatch_key: str = "PrivateUse1"
    dist_backend: str = "neuron"
    simple_compile_backend: str = "eager"

    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        return torch.neuron.get_device_name(device_id)

    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        return torch.neuron.mem_get_info(device_id)[1]

    @classmethod
    def set_device(cls, device: torch.device) -> None:
        torch.neuron.set_device(device)

    @classmethod
    def manual_seed_all(cls, seed: int) -> None:
        torch.neuron.manual_seed_all(seed)

    @classmethod
    def get_current_memory_usage(cls, device: torch.types.Device | None = None) -> float:
        return float(torch.neuron.memory_allocated(device))

    @classmethod
    def get_device_communicator_cls(cls) -> str:
        return COMMUNICATOR

    @classmethod
    def check_and_update_config(cls, vllm_config) -> None:
        reject_unsupported(vllm_config)
        _check_cores(vllm_config.parallel_config)
        device_config = vllm_config.device_config
        # The CPU platform's checks assert a "cpu" device type; they run unchanged, then neuron is put back.
        device_type, device = device_config.device_type, device_config.device
        device_config.device_type = "cpu"
        try:
            super().check_and_update_config(vllm_config)
        finally:
            device_config.device_type, device_config.device = device_type, device
        # vLLM's CPU workers bind their OpenMP threads one NUMA node per rank; the logical NeuronCores share
        # the host's CPUs, so ranks are not bound unless VLLM_CPU_OMP_THREADS_BIND asks for it.
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
        parallel_config = vllm_config.parallel_config
        if parallel_config.worker_cls in ("auto", "vllm.v1.worker.cpu_worker.CPUWorker"):
            parallel_config.worker_cls = WORKER
        _choose_compilation(vllm_config)


def _check_cores(parallel_config) -> None:
    """One rank per logical NeuronCore of this instance (`torch.neuron.device_count()`)."""
    cores = torch.neuron.device_count()
    if parallel_config.world_size > cores:
        raise ValueError(
            f"--tensor-parallel-size {parallel_config.tensor_parallel_size} x --pipeline-parallel-size "
            f"{parallel_config.pipeline_parallel_size} needs {parallel_config.world_size} logical NeuronCores, but "
            f"this instance has {cores}: lower --tensor-parallel-size, or choose a larger instance "
            "(TORCH_NEURONX_INSTANCE_TYPE) or fewer physical cores per logical core (NEURON_LOGICAL_NC_CONFIG)."
        )


def _choose_compilation(vllm_config) -> None:
    """Run eager: vLLM compiles with `dynamic=True` (one graph for every batch size), which the neuron
    backend refuses by design (static shapes, one program per shape as on Trainium), and its ahead-of-time
    path needs a serialisable compiled function. Say so once instead of failing in Dynamo."""
    from vllm.config import CompilationMode  # vllm.config imports the platform: not at module level

    config = vllm_config.compilation_config
    if config.mode != CompilationMode.NONE:
        logger.info(
            "neuron: vLLM's compiled mode (%s) traces with dynamic shapes, which the neuron backend does not "
            "compile (static shapes only); running eager.", config.mode.name,
        )
        config.mode = CompilationMode.NONE
