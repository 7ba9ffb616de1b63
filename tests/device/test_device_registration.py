"""Registration: the PrivateUse1 backend is `neuron`, the device module and the
generated tensor/module/storage methods exist, and neuron is the accelerator."""
import torch
import torch.nn as nn


def test_backend_name_and_device_module():
    assert torch._C._get_privateuse1_backend_name() == "neuron"
    assert torch.neuron is torch.get_device_module("neuron")
    assert torch.device("neuron:1").type == "neuron"


def test_generated_methods():
    t = torch.arange(4.0)
    n = t.neuron()
    assert n.is_neuron and not t.is_neuron
    assert n.device == torch.device("neuron:0")
    assert t.neuron(1).device == torch.device("neuron:1")
    assert torch.equal(n.cpu(), t)
    m = nn.Linear(2, 2).neuron()
    assert m.weight.is_neuron
    s = n.untyped_storage()
    assert s.is_neuron and s.device.type == "neuron"
    assert torch.equal(torch.tensor([], dtype=torch.uint8).set_(s.cpu()).view(torch.float32), t)


def test_accelerator_api():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("neuron")
    assert torch.accelerator.device_count() == torch.neuron.device_count() == 4
    torch.accelerator.set_device_index(2)
    assert torch.accelerator.current_device_index() == 2 == torch.neuron.current_device()
    assert torch.ones(1, device="neuron").device.index == 2
    torch.accelerator.set_device_index(0)
    s = torch.accelerator.current_stream()
    assert s.device_type == torch.neuron.current_stream().device_type
    torch.accelerator.synchronize()
    x = torch.empty(256, device="neuron")
    assert torch.accelerator.memory_allocated(0) == torch.neuron.memory_allocated(0) >= x.nbytes
    assert torch.accelerator.get_memory_info(0) == torch.neuron.mem_get_info(0)
