"""Device management of torch.neuron, after torch.cuda's."""
from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass

import torch

from .. import runtime
from ._utils import DeviceLike, device_index, torch_neuronx_core as _core

_initialized = False
_init_lock = threading.Lock()
_warned_unavailable = False


def _is_in_bad_fork() -> bool:
    return _core()._is_in_bad_fork()


def is_available() -> bool:
    """True when at least one NeuronCore is visible to this process."""
    return device_count() > 0


def device_count() -> int:
    """Number of logical NeuronCores visible to this process."""
    global _warned_unavailable
    if runtime.error() is not None:
        if not _warned_unavailable:
            warnings.warn(f"Neuron device unavailable: {runtime.error()}", stacklevel=2)
            _warned_unavailable = True
        return 0
    return _core()._device_count()


def is_initialized() -> bool:
    return _initialized and not _is_in_bad_fork()


def _lazy_init() -> None:
    global _initialized
    if is_initialized():
        return
    with _init_lock:
        if is_initialized():
            return
        if _is_in_bad_fork():
            raise RuntimeError(
                "Cannot re-initialize Neuron runtime in forked subprocess. To use Neuron with "
                "multiprocessing, you must use the 'spawn' start method "
                "(torch.multiprocessing.set_start_method('spawn'))."
            )
        runtime.topology()  # raises the environment error, naming the variable
        _core()._mark_initialized()
        _initialized = True


def init() -> None:
    """Initialise the neuron runtime (it also starts lazily on first use)."""
    _lazy_init()


def current_device() -> int:
    """Index of the current neuron device of this thread."""
    return _core()._current_device()


def set_device(device: DeviceLike) -> None:
    """Set the current neuron device (int, "neuron:i" or torch.device)."""
    idx = device_index(device, optional=False)
    _lazy_init()
    _core()._set_device(idx)


def _check(idx: int) -> int:
    _core()._check_device(idx)
    return idx


class device:
    """Context manager that changes the current neuron device."""

    def __init__(self, device: DeviceLike):
        self.idx = -1 if device is None else device_index(device)
        self.prev_idx = -1

    def __enter__(self):
        if self.idx == -1:
            return self
        self.prev_idx = current_device()
        if self.idx != self.prev_idx:
            set_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx != -1 and self.prev_idx != self.idx:
            _core()._set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the device of `obj` (a neuron tensor) current."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if getattr(obj, "is_neuron", False) else None)


def synchronize(device: DeviceLike = None) -> None:
    """Wait for all work on a neuron device; the virtual core runs ops
    synchronously on the host, so this only validates the device."""
    _check(device_index(device))


def get_device_name(device: DeviceLike = None) -> str:
    return f"neuron:{_check(device_index(device))}"


@dataclass(frozen=True)
class NeuronDeviceProperties:
    name: str                  # chip name, e.g. "trn2"
    total_memory: int          # HBM bytes of this logical core
    core_version: str          # "NeuronCore-v3"
    logical_core_index: int    # instance-wide logical core id
    physical_cores: int        # physical cores forming this logical core (LNC)
    logical_cores_per_chip: int
    chip_index: int
    instance_type: str
    major: int
    minor: int

    def __repr__(self) -> str:
        return (f"NeuronDeviceProperties(name='{self.name}', total_memory={self.total_memory // 2**20}MB, "
                f"core_version='{self.core_version}', lnc={self.physical_cores}, "
                f"instance_type='{self.instance_type}')")


def get_device_properties(device: DeviceLike = None) -> NeuronDeviceProperties:
    idx = _check(device_index(device))
    topo = runtime.topology()
    core = topo.cores[idx]
    major = int(topo.chip.core_version.rsplit("v", 1)[-1])
    return NeuronDeviceProperties(
        name=topo.chip.name,
        total_memory=_core()._hbm_capacity(idx),
        core_version=topo.chip.core_version,
        logical_core_index=core.global_index,
        physical_cores=topo.lnc,
        logical_cores_per_chip=topo.view.cores_per_chip,
        chip_index=core.chip_index,
        instance_type=topo.instance.name,
        major=major,
        minor=0,
    )


def get_device_capability(device: DeviceLike = None) -> tuple[int, int]:
    props = get_device_properties(device)
    return props.major, props.minor
