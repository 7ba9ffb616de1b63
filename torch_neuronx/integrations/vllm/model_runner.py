"""`NeuronModelRunner`: vLLM's CPU model runner with its weights, inputs and KV cache on `neuron:<rank>`.

vLLM's CPU runner aliases every "device" buffer to its host twin; here the device buffers stay on the
NeuronCore, as on a GPU, so each step copies its inputs host -> device once and the model, the KV cache
and the sampler all read device memory.
"""
from __future__ import annotations

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

    def _sync_device(self) -> None:
        torch.neuron.synchronize(self.device)
