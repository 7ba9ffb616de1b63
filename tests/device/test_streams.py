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
    """record() stores the host time: elapsed_time lies between the host work done between the two
    records and the wall time around them (no machine-speed threshold; benchmarks/event_timing.py
    prints how close it comes)."""
    start = torch.neuron.Event(enable_timing=True)
    end = torch.neuron.Event(enable_timing=True)
    outer = time.perf_counter()
    start.record()
    inner = time.perf_counter()
    time.sleep(0.02)
    torch.ones(10, device="neuron").sum()
    inner = time.perf_counter() - inner
    end.record()
    outer = time.perf_counter() - outer
    end.synchronize()
    elapsed = start.elapsed_time(end)
    assert inner * 1e3 - 0.01 <= elapsed <= outer * 1e3 + 0.01, (inner, elapsed, outer)
    base_start, base_end = torch.Event(device="neuron", enable_timing=True), torch.Event(device="neuron", enable_timing=True)
    base_start.record()
    base_end.record()
    assert base_start.elapsed_time(base_end) >= 0
    import pytest
    with pytest.raises(RuntimeError, match="recorded"):
        torch.neuron.Event(enable_timing=True).elapsed_time(torch.neuron.Event(enable_timing=True))


def test_stream_ids_follow_torch_cuda():
    """docs/virtual-runtime.md: 0 is the default stream, 1-32 the shared pool, new streams 33 and up."""
    assert torch.neuron.default_stream().stream_id == 0
    new = [torch.neuron.Stream().stream_id, torch.neuron.Stream(device="neuron:1").stream_id,
           torch.Stream(device="neuron").stream_id]
    assert all(i >= 33 for i in new) and len(set(new)) == 3 and new == sorted(new), new
    # The pool is what PyTorch itself takes streams from, e.g. for a Future's callbacks.
    pool = []
    future = torch.futures.Future(devices=["neuron:0"])
    for _ in range(33):
        future.then(lambda f: pool.append(torch.neuron.current_stream().stream_id))
    future.set_result(torch.ones(2, device="neuron"))
    assert len(pool) == 33 and set(pool) == set(range(1, 33)), pool  # 32 ids, then it wraps
    rebuilt = torch.neuron.Stream(stream_id=new[0], device_index=0, device_type=torch.neuron.Stream().device_type)
    assert rebuilt.stream_id == new[0] and rebuilt.device == torch.device("neuron:0")


def test_record_stream_does_nothing():
    """Memory is never held back for another stream: a tensor used on a side stream frees at del."""
    import gc

    gc.collect()
    base = torch.neuron.memory_allocated()
    side = torch.neuron.Stream()
    x = torch.arange(1024.0, device="neuron")
    with torch.neuron.stream(side):
        y = x * 2
    x.record_stream(side)
    y.record_stream(side)
    assert torch.equal(y.cpu(), torch.arange(1024.0) * 2)
    assert torch.neuron.memory_allocated() == base + 2 * 4096
    del x, y
    assert torch.neuron.memory_allocated() == base
