"""Streams and events of torch.neuron.

The virtual NeuronCore executes each op synchronously on the host in issue
order, so every stream is always complete: query() is True, synchronize() and
wait_*() only order, and events record the host time they are reached, so
Event.elapsed_time measures the work between two records.
"""
from __future__ import annotations

import time

import torch

from ._utils import DeviceLike, device_index

class Stream(torch.Stream):
    """A neuron stream (a torch.Stream on the neuron device)."""

    def __new__(cls, device: DeviceLike = None, priority: int = 0, **kwargs):
        if "stream_id" in kwargs:  # rebuild from (stream_id, device_index, device_type)
            return super().__new__(cls, **kwargs)
        idx = device_index(device)
        return super().__new__(cls, device=torch.device("neuron", idx), priority=priority)

    def wait_event(self, event: torch.Event) -> None:
        event.wait(self)

    def wait_stream(self, stream: torch.Stream) -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event: torch.Event | None = None) -> torch.Event:
        if event is None:
            event = Event()
        event.record(self)
        return event

    def __eq__(self, other) -> bool:
        return (isinstance(other, torch.Stream) and other.device_type == self.device_type
                and other.device_index == self.device_index and other.stream_id == self.stream_id)

    def __hash__(self) -> int:
        return hash((self.stream_id, self.device_index, self.device_type))


class Event(torch.Event):
    """A neuron event; elapsed_time() gives milliseconds between two records."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        event = super().__new__(cls, device="neuron", enable_timing=enable_timing,
                                blocking=blocking, interprocess=interprocess)
        event._timing = enable_timing
        event._recorded_ns = None
        return event

    def record(self, stream: torch.Stream | None = None) -> None:
        super().record(current_stream() if stream is None else stream)
        self._recorded_ns = time.perf_counter_ns()

    def wait(self, stream: torch.Stream | None = None) -> None:
        super().wait(current_stream() if stream is None else stream)

    def elapsed_time(self, end_event: torch.Event) -> float:
        # torch 2.13's torch.Event.elapsed_time rejects subclasses as its
        # argument, so two neuron Events are timed here. Ops run synchronously,
        # so the host times of the two records bound exactly the work between.
        if type(end_event) is torch.Event:
            return super().elapsed_time(end_event)
        if not (self._timing and getattr(end_event, "_timing", False)):
            raise RuntimeError("Both events must be created with enable_timing=True to measure "
                               "elapsed time: torch.neuron.Event(enable_timing=True).")
        if self._recorded_ns is None or getattr(end_event, "_recorded_ns", None) is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time: "
                               "call event.record() on each.")
        return (end_event._recorded_ns - self._recorded_ns) / 1e6


def _wrap(stream: torch.Stream) -> Stream:
    return Stream(stream_id=stream.stream_id, device_index=stream.device_index,
                  device_type=stream.device_type)


def current_stream(device: DeviceLike = None) -> Stream:
    """The stream ops are issued to on `device` (this thread)."""
    return _wrap(torch.accelerator.current_stream(device_index(device)))


def default_stream(device: DeviceLike = None) -> Stream:
    idx = device_index(device)
    cur = torch.accelerator.current_stream(idx)
    return Stream(stream_id=0, device_index=idx, device_type=cur.device_type)


def set_stream(stream: torch.Stream | None) -> None:
    if stream is None:
        return
    torch.accelerator.set_stream(stream)


class StreamContext:
    """Context manager that makes `stream` current on its device."""

    def __init__(self, stream: torch.Stream | None):
        self.stream = stream
        self.prev_stream: torch.Stream | None = None
        self.prev_device: int | None = None

    def __enter__(self):
        if self.stream is None:
            return self
        from .device import current_device, set_device

        self.prev_device = current_device()
        if self.stream.device_index != self.prev_device:
            set_device(self.stream.device_index)
        self.prev_stream = torch.accelerator.current_stream(self.stream.device_index)
        torch.accelerator.set_stream(self.stream)
        return self

    def __exit__(self, *exc):
        if self.stream is None:
            return False
        from .device import set_device

        torch.accelerator.set_stream(self.prev_stream)
        if self.prev_device is not None and self.prev_device != self.stream.device_index:
            set_device(self.prev_device)
        return False


def stream(stream: torch.Stream | None) -> StreamContext:
    """Context manager selecting `stream` (None: no change)."""
    return StreamContext(stream)
