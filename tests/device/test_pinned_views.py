"""Pinned host memory is recognised at any address inside a pinned block (csrc/pinned_host.cpp).

CUDA answers is_pinned() from the pointer's attributes, so a tensor whose
storage starts inside a page-locked block is pinned too; the neuron pinned
allocator keeps address ranges to answer the same.
"""
import numpy as np
import torch


def test_views_of_a_pinned_tensor():
    x = torch.arange(16.0).pin_memory()
    assert x.is_pinned() and x[3:].is_pinned() and x[::2].is_pinned()


def test_storage_starting_inside_a_pinned_block():
    x = torch.arange(16.0).pin_memory()
    interior = x.untyped_storage()[8:]  # a new storage whose data pointer is 8 bytes in
    y = torch.tensor([], dtype=torch.float32).set_(interior, 0, (14,), (1,))
    assert y.data_ptr() == x.data_ptr() + 8
    assert y.is_pinned() and y.tolist() == x[2:].tolist()
    last = torch.tensor([], dtype=torch.float32).set_(x.untyped_storage()[60:], 0, (1,), (1,))
    assert last.is_pinned()  # the last element of the block


def test_numpy_view_into_pinned_memory():
    x = torch.arange(16.0).pin_memory()
    view = torch.from_numpy(x.numpy()[5:])
    assert view.data_ptr() == x.data_ptr() + 20 and view.is_pinned()


def test_unpinned_memory_is_not_pinned():
    assert not torch.arange(16.0).is_pinned()
    assert not torch.from_numpy(np.arange(16.0)[3:]).is_pinned()


def test_pinned_copies_reach_the_device():
    x = torch.arange(8.0).pin_memory()
    y = x[2:].to("neuron", non_blocking=True)
    assert y.tolist() == list(range(2, 8)) and y.device.type == "neuron"
