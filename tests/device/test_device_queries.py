"""Device queries of torch.neuron, after torch.cuda."""
import pytest
import torch


def test_is_available_and_init():
    assert torch.neuron.is_available()
    torch.neuron.init()
    assert torch.neuron.is_initialized()


@pytest.mark.parametrize("spec", [1, "neuron:1", torch.device("neuron", 1)])
def test_set_device_forms(spec):
    torch.neuron.set_device(spec)
    assert torch.neuron.current_device() == 1
    assert torch.empty(1, device="neuron").device == torch.device("neuron:1")


def test_set_device_bad_input():
    with pytest.raises(ValueError, match="neuron device"):
        torch.neuron.set_device("cpu")
    with pytest.raises(TypeError, match="device must be"):
        torch.neuron.set_device(1.5)
    with pytest.raises(ValueError, match=">= 0"):
        torch.neuron.set_device(-3)
    assert torch.neuron.current_device() == 0


def test_device_context_manager_restores():
    with torch.neuron.device(2):
        assert torch.neuron.current_device() == 2
        assert torch.ones(1, device="neuron").device.index == 2
        with torch.neuron.device("neuron:3"):
            assert torch.neuron.current_device() == 3
        assert torch.neuron.current_device() == 2
    assert torch.neuron.current_device() == 0
    x = torch.ones(1, device="neuron:1")
    with torch.neuron.device_of(x):
        assert torch.neuron.current_device() == 1


def test_properties():
    p = torch.neuron.get_device_properties("neuron:2")
    assert p.name == "trn2"
    assert p.total_memory == 24 * 2**30
    assert p.instance_type == "trn2.3xlarge"
    assert p.logical_cores_per_chip == 4 and p.physical_cores == 2
    assert torch.neuron.get_device_name() == "neuron:0"
    torch.neuron.synchronize()
    torch.neuron.synchronize("neuron:3")
