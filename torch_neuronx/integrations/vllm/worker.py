"""`NeuronWorker`: one vLLM worker per logical NeuronCore (`neuron:<local rank>`).

vLLM's CPU worker sizes the KV cache from the host's NUMA memory; on neuron the budget is the core's
device memory, as on vLLM's GPU platforms: `gpu_memory_utilization` x the core's total memory
(`torch.neuron.mem_get_info()`), less the peak that loading the model and one profiling forward pass
at the largest batch reached.
"""
from __future__ import annotations

import torch
from vllm.logger import init_logger
from vllm.utils.mem_utils import format_gib
from vllm.utils.torch_utils import set_random_seed
from vllm.v1.worker.cpu_worker import CPUWorker
from vllm.v1.worker.gpu_worker import Worker, init_worker_distributed_environment

from . import _allocations
from .model_runner import NeuronModelRunner

logger = init_logger(f"vllm.{__name__}")  # under vLLM's logger, so its handler prints it


class NeuronWorker(CPUWorker):
    def __init__(self, vllm_config, local_rank: int, rank: int, distributed_init_method: str,
                 is_driver_worker: bool = False):
        # Skip CPUWorker.__init__: it binds NUMA memory and sizes memory from the host.
        Worker.__init__(self, vllm_config, local_rank, rank, distributed_init_method,
                        is_driver_worker=is_driver_worker)
        self.parallel_config.disable_custom_all_reduce = True

    def init_device(self):
        _allocations.install()
        self.device = torch.device("neuron", self.local_rank)
        torch.neuron.set_device(self.device)
        init_worker_distributed_environment(
            self.vllm_config, self.rank, self.distributed_init_method, self.local_rank, "neuron"
        )
        set_random_seed(self.model_config.seed)
        self.model_runner = NeuronModelRunner(self.vllm_config, self.device)

    def determine_available_memory(self) -> int:
        """Bytes for the KV cache: the share of the core vLLM may use, less the model and its peak activations."""
        free, total = torch.neuron.mem_get_info(self.device)
        utilization = self.cache_config.gpu_memory_utilization
        if self.cache_config.kv_cache_memory_bytes is not None:
            requested = self.cache_config.kv_cache_memory_bytes
            if requested > free:
                raise ValueError(
                    f"--kv-cache-memory-bytes {requested} is more than the {format_gib(free)} GiB free on "
                    f"{self.device} ({format_gib(total)} GiB in all); lower it."
                )
            return requested
        torch.neuron.reset_peak_memory_stats(self.device)
        self.model_runner.profile_run()
        peak = torch.neuron.max_memory_allocated(self.device)
        budget = int(total * utilization)
        available = budget - peak
        logger.info(
            "neuron: %s GiB for the KV cache on %s (%.2f x %s GiB, less a %s GiB peak for the model and "
            "activations).", format_gib(max(available, 0)), self.device, utilization, format_gib(total),
            format_gib(peak))
        if available <= 0:
            raise ValueError(
                f"The model and its activations peak at {format_gib(peak)} GiB on {self.device}, which leaves "
                f"nothing for the KV cache within --gpu-memory-utilization {utilization} of the core's "
                f"{format_gib(total)} GiB; raise --gpu-memory-utilization, or lower --max-num-batched-tokens "
                "or use more --tensor-parallel-size."
            )
        return available
