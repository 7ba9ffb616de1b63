"""Streams always name their core, as on CUDA (csrc/guard.cpp).

`torch.Stream(device="neuron")` and `torch.neuron.Stream()` without an index
belong to the current device; events recorded on them report `neuron:N`;
`with stream:` selects the stream (and its device) and restores both.
"""
import pytest
import torch


@pytest.fixture
def on_core_two():
    torch.neuron.set_device(2)
    yield 2
    torch.neuron.set_device(0)


def test_stream_without_index_is_on_the_current_device(on_core_two):
    s = torch.Stream(device="neuron")
    assert s.device_index == 2 and s.device == torch.device("neuron:2")
    n = torch.neuron.Stream()
    assert n.device_index == 2 and isinstance(n, torch.Stream)
    assert torch.accelerator.current_stream().device_index == 2
    assert torch.neuron.current_stream().device == torch.device("neuron:2")
    assert torch.Stream(device="neuron:1").device_index == 1  # an explicit index wins


def test_with_stream_selects_and_restores(on_core_two):
    s = torch.Stream(device="neuron")
    before = torch.accelerator.current_stream()
    with s:
        assert torch.accelerator.current_stream() == s
        y = torch.ones(3, device="neuron") + 1
    assert torch.accelerator.current_stream() == before
    assert y.device == torch.device("neuron:2") and y.tolist() == [2.0] * 3
    other = torch.Stream(device="neuron:1")
    with other:
        assert torch.accelerator.current_device_index() == 1
        assert torch.accelerator.current_stream() == other
    assert torch.accelerator.current_device_index() == 2


def test_events_report_the_stream_device(on_core_two):
    s = torch.Stream(device="neuron")
    event = s.record_event()
    assert event.device == torch.device("neuron:2")
    bare = torch.Event(device="neuron")
    bare.record(torch.Stream(device="neuron:3"))
    assert bare.device == torch.device("neuron:3")
    assert torch.neuron.Stream().record_event().device == torch.device("neuron:2")
    s.wait_event(event)
    s.synchronize()
    assert event.query()


def test_stream_for_a_core_that_does_not_exist():
    count = torch.neuron.device_count()
    with pytest.raises(RuntimeError, match=f"invalid device ordinal: neuron:{count}"):
        torch.Stream(device=f"neuron:{count}")
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.neuron.Stream(device=count)
    ghost = torch.Stream(stream_id=40, device_index=count, device_type=torch.Stream(device="neuron").device_type)
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        with ghost:
            pass
    assert torch.accelerator.current_device_index() == 0  # nothing changed
