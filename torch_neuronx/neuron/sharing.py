"""Neuron tensors through torch.multiprocessing (queues, spawn arguments, pipes).

torch shares a CPU tensor by its storage's file descriptor and a CUDA tensor
by an IPC handle; neither exists for neuron memory, so torch's reducer fails
with "_share_fd_: only available on CPU", and on a queue it fails in the
feeder thread, leaving the receiving process waiting forever.

A neuron tensor is therefore sent as a copy: its bytes go through a shared CPU
tensor, and the receiver puts them back on the same neuron core. The receiver
gets the same values, dtype, shape, strides' layout (contiguous), device and
requires_grad; it does not share memory with the sender (writes in one process
are not seen by the other, unlike CUDA IPC). Non-leaf tensors that require
grad are refused as torch refuses them.
"""
from __future__ import annotations

import torch
from torch.multiprocessing import reductions

_NEURON = "neuron"


def rebuild_neuron_tensor(cls, host: torch.Tensor, index: int, requires_grad: bool) -> torch.Tensor:
    t = host.to(torch.device(_NEURON, index))
    if cls is torch.nn.Parameter:
        return torch.nn.Parameter(t, requires_grad=requires_grad)
    return t.requires_grad_(requires_grad)


def rebuild_neuron_storage(host: torch.UntypedStorage, index: int) -> torch.UntypedStorage:
    return host.to(torch.device(_NEURON, index))


def reduce_tensor(tensor: torch.Tensor):
    if tensor.device.type != _NEURON:
        return reductions.reduce_tensor(tensor)
    if tensor.requires_grad and not tensor.is_leaf:
        return reductions.reduce_tensor(tensor)  # raises torch's own "Cowardly refusing" error
    cls = torch.nn.Parameter if isinstance(tensor, torch.nn.Parameter) else torch.Tensor
    host = tensor.detach().to("cpu")
    return rebuild_neuron_tensor, (cls, host, tensor.device.index, tensor.requires_grad)


def reduce_storage(storage):
    if storage.device.type != _NEURON:
        return reductions.reduce_storage(storage)
    return rebuild_neuron_storage, (storage.cpu(), storage.device.index)


def install() -> None:
    """Route neuron tensors and storages through the copying reducers above."""
    from multiprocessing.reduction import ForkingPickler

    for cls in (torch.Tensor, torch.nn.Parameter, *torch._tensor_classes):
        ForkingPickler.register(cls, reduce_tensor)
    ForkingPickler.register(torch.UntypedStorage, reduce_storage)
