"""Streams and events of torch.neuron (synchronous host execution)."""
import time

import torch


def test_stream_types_and_current():
    s = torch.neuron.Stream()
    assert isinstance(s, torch.Stream) and s.device_type == torch.neuron.current_stream().device_type
    assert s.device == torch.device("neuron:0")
    assert torch.neuron.current_stream() == torch.neuron.default_stream()
    assert torch.neuron.current_stream().stream_id == 0
    with torch.neuron.stream(s):
        assert torch.neuron.current_stream() == s
        x = torch.ones(3, device="neuron") * 2
    assert torch.neuron.current_stream() == torch.neuron.default_stream()
    assert x.cpu().tolist() == [2.0] * 3
    s1 = torch.neuron.Stream(device="neuron:2")
    with torch.neuron.stream(s1):
        assert torch.neuron.current_device() == 2
    assert torch.neuron.current_device() == 0
    torch.neuron.set_stream(s)
    assert torch.neuron.current_stream() == s
    torch.neuron.set_stream(torch.neuron.default_stream())
    assert s.query()
    s.synchronize()


def test_events_and_waits():
    s1, s2 = torch.neuron.Stream(), torch.neuron.Stream()
    e = torch.neuron.Event()
    assert isinstance(e, torch.Event)
    e.record(s1)
    s2.wait_event(e)
    s2.wait_stream(s1)
    assert e.query()
    e.synchronize()
    ev = s1.record_event()
    assert isinstance(ev, torch.neuron.Event)


def test_elapsed_time_measures_work():
    start = torch.neuron.Event(enable_timing=True)
    end = torch.neuron.Event(enable_timing=True)
    start.record()
    time.sleep(0.02)
    torch.ones(10, device="neuron").sum()
    end.record()
    end.synchronize()
    assert 15 <= start.elapsed_time(end) < 2000
    base_start, base_end = torch.Event(device="neuron", enable_timing=True), torch.Event(device="neuron", enable_timing=True)
    base_start.record()
    base_end.record()
    assert base_start.elapsed_time(base_end) >= 0
    import pytest
    with pytest.raises(RuntimeError, match="recorded"):
        torch.neuron.Event(enable_timing=True).elapsed_time(torch.neuron.Event(enable_timing=True))
