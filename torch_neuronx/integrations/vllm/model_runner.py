"""`NeuronModelRunner`: vLLM's CPU model runner with its weights, inputs and KV cache on `neuron:<rank>`.

vLLM's CPU runner aliases every "device" buffer to its host twin; here the device buffers stay on the
NeuronCore, as on a GPU, so each step copies its inputs host -> device once and the model and the KV cache
read device memory. Greedy sampling runs on the device; the random path runs on the host with host
generators (`_allocations`, `_host_generators`).
"""
from __future__ import annotations

from contextlib import contextmanager

import torch
from vllm.v1.worker.cpu_model_runner import CPUModelRunner, _torch_cuda_wrapper
from vllm.v1.worker.gpu_model_runner import GPUModelRunner


class NeuronModelRunner(CPUModelRunner):
    def __init__(self, vllm_config, device: torch.device):
        # GPUModelRunner's constructor, not CPUModelRunner's: that one asserts a CPU device and
        # aliases the device buffers to host memory.
        with _torch_cuda_wrapper():
            GPUModelRunner.__init__(self, vllm_config, device)
        self.use_cuda_graph = False

    def _update_states(self, scheduler_output):
        with _host_generators():
            return super()._update_states(scheduler_output)

    def _dummy_sampler_run(self, *args, **kwargs):
        with _host_generators():
            return super()._dummy_sampler_run(*args, **kwargs)

    def _sync_device(self) -> None:
        torch.neuron.synchronize(self.device)


@contextmanager
def _host_generators():
    """Per-request sampling generators on the host, as on vLLM's CPU platform: its sampler draws host integers
    from them (its Gumbel noise starts from them), so a request's seed gives the tokens it gives there."""
    generator = torch.Generator

    def host_generator(device=None):
        return generator(device="cpu")

    torch.Generator = host_generator
    try:
        yield
    finally:
        torch.Generator = generator
