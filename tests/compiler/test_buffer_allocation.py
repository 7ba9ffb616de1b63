"""`_C._empty_strided_neuron`, which allocates every buffer of a compiled graph (and grouped_mm's
outputs): a raw CPython function reading its shape tuples itself. It must accept what the wrapper
and grouped_mm pass (tuples, lists), put the tensor on the named core, and reject bad arguments
with a TypeError, as the pybind11 binding before it did."""
from __future__ import annotations

import pytest
import torch

from torch_neuronx import _C


@pytest.mark.parametrize("size,stride", [((2, 3), (3, 1)), ([4, 1, 5], [5, 5, 1]), ((), ()), ((0, 7), (7, 1))])
def test_shapes_dtype_and_core(size, stride):
    assert torch.neuron.device_count() == 4   # one trn2 chip at LNC=2, the default topology
    core = 1                                  # not the current core: the buffer follows the argument
    t = _C._empty_strided_neuron(size, stride, torch.bfloat16, core)
    assert t.device == torch.device("neuron", core)
    assert tuple(t.shape) == tuple(size) and t.stride() == tuple(stride) and t.dtype == torch.bfloat16
    t.fill_(1)   # the bytes are the tensor's own
    assert torch.equal(t.cpu(), torch.ones(size, dtype=torch.bfloat16))


def test_strided_buffer_is_counted_by_the_allocator():
    before = torch.neuron.memory_allocated(0)
    t = _C._empty_strided_neuron((256, 256), (1, 256), torch.float32, 0)   # a transposed buffer
    assert torch.neuron.memory_allocated(0) - before >= 256 * 256 * 4
    assert t.stride() == (1, 256)
    del t


@pytest.mark.parametrize("args", [
    ((2,), (1,), "float32", 0),            # dtype not a torch.dtype
    ((2.5,), (1,), torch.float32, 0),      # a size that is not an int
    (3, (1,), torch.float32, 0),           # size not a sequence
    ((2,), (1,), torch.float32),           # index missing
])
def test_bad_arguments_raise_type_error(args):
    with pytest.raises(TypeError):
        _C._empty_strided_neuron(*args)
