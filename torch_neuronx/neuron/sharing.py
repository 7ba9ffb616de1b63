"""Neuron tensors through torch.multiprocessing (queues, spawn arguments, pipes).

torch shares a CPU tensor by its storage's file descriptor and a CUDA tensor
by an IPC handle; neither exists for neuron memory, so torch's reducer fails
with "_share_fd_: only available on CPU", and on a queue it fails in the
feeder thread, leaving the receiving process waiting forever.

A neuron tensor is therefore sent as a copy: the bytes of the span of its
storage that the view reaches travel in the pickle, with its shape and strides,
and the receiver puts them back on the same neuron core as a view of the same
layout. The receiver gets the same values, dtype, shape, strides (a transposed
or sliced view stays one; its storage offset becomes 0, since only the span is
sent), device and requires_grad; it does not share memory with the sender
(writes in one process are not seen by the other, unlike CUDA IPC). A received
tensor is an ordinary neuron tensor, so it can be sent on again. Non-leaf
tensors that require grad are refused as torch refuses them.
"""
from __future__ import annotations

import torch
from torch.multiprocessing import reductions

_NEURON = "neuron"


def _span(shape, stride) -> int:
    """Elements of storage a view reaches from its offset (strides are never negative in torch)."""
    if any(n == 0 for n in shape):
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(shape, stride))


def _bytes_of(t: torch.Tensor) -> bytes:
    """The bytes of the storage span the view reaches, from its first element."""
    t = t.detach()
    span = _span(t.shape, t.stride())
    if span == 0:
        return b""
    flat = t.as_strided((span,), (1,), t.storage_offset())  # a 1-D view of the span, still on neuron
    return flat.to("cpu").view(torch.uint8).numpy().tobytes()


def _from_bytes(data: bytes, dtype: torch.dtype, shape, index: int, stride=None) -> torch.Tensor:
    device = torch.device(_NEURON, index)
    if stride is None:
        stride = torch.empty(shape, device="meta").stride()  # contiguous (storages, older pickles)
    if not data:
        return torch.empty_strided(shape, stride, dtype=dtype, device=device)
    span = torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dtype).to(device)
    # set_ (not as_strided): a tensor of its own over the span, not a view, so it can be a leaf
    return torch.empty(0, dtype=dtype, device=device).set_(span.untyped_storage(), 0, shape, stride)


def rebuild_neuron_tensor(cls, data: bytes, dtype, shape, index: int, requires_grad: bool,
                          stride=None) -> torch.Tensor:
    t = _from_bytes(data, dtype, shape, index, stride)
    if cls is torch.nn.Parameter:
        return torch.nn.Parameter(t, requires_grad=requires_grad)
    return t.requires_grad_(requires_grad)


def rebuild_neuron_storage(data: bytes, index: int) -> torch.UntypedStorage:
    return _from_bytes(data, torch.uint8, (len(data),), index).untyped_storage()


def reduce_tensor(tensor: torch.Tensor):
    if tensor.device.type != _NEURON:
        return reductions.reduce_tensor(tensor)
    if tensor.requires_grad and not tensor.is_leaf:
        return reductions.reduce_tensor(tensor)  # raises torch's own "Cowardly refusing" error
    cls = torch.nn.Parameter if isinstance(tensor, torch.nn.Parameter) else torch.Tensor
    # The bytes travel in the pickle: a temporary shared CPU copy would close its file
    # descriptor before a spawned child could open it.
    return rebuild_neuron_tensor, (cls, _bytes_of(tensor), tensor.dtype, tuple(tensor.shape),
                                   tensor.device.index, tensor.requires_grad, tuple(tensor.stride()))


def reduce_storage(storage):
    if storage.device.type != _NEURON:
        return reductions.reduce_storage(storage)
    host = torch.empty(0, dtype=torch.uint8).set_(storage.cpu())
    return rebuild_neuron_storage, (host.numpy().tobytes(), storage.device.index)


def install() -> None:
    """Route neuron tensors and storages through the copying reducers above."""
    from multiprocessing.reduction import ForkingPickler

    for cls in (torch.Tensor, torch.nn.Parameter, *torch._tensor_classes):
        ForkingPickler.register(cls, reduce_tensor)
    ForkingPickler.register(torch.UntypedStorage, reduce_storage)
