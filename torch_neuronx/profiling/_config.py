"""TorchNeuron's profiler configuration names, on the virtual NeuronCore.

`NeuronConfig` is a `torch.profiler` experimental config (so it is passed as
`experimental_config=`, as on TorchNeuron) that also carries TorchNeuron's
options. On Trainium the modes select Neuron runtime captures (NEFF/NTFF device
profiles, runtime traces, CPU and host-memory samplers). The virtual core runs
no NEFF and has no Neuron runtime, so each mode says what it becomes here, once,
instead of failing:

- DEVICE: the estimated device track of the trace (no .neff/.ntff files).
- RUNTIME, CPU_UTIL: nothing to capture; the CPU track already holds the host side.
- HOST_MEMORY: nothing captured; use `profile(profile_memory=True)`.
"""
from __future__ import annotations

import enum
import os
import re
import socket
import warnings

from torch._C._profiler import _ExperimentalConfig


class ProfileMode(enum.Enum):
    DEVICE = "device"
    RUNTIME = "runtime"
    CPU_UTIL = "cpu_util"
    HOST_MEMORY = "host_memory"


# What each mode means on the virtual core; None: it is fully served.
_VIRTUAL_CORE_NOTE = {
    ProfileMode.DEVICE: None,
    ProfileMode.RUNTIME: (
        "ProfileMode.RUNTIME has no meaning on the virtual NeuronCore (there is no Neuron "
        "runtime, so no trace_info.pb / ntrace.pb); the CPU track holds the host side."
    ),
    ProfileMode.CPU_UTIL: (
        "ProfileMode.CPU_UTIL has no meaning on the virtual NeuronCore (no cpu_util.pb is "
        "written); the CPU track holds the measured host times."
    ),
    ProfileMode.HOST_MEMORY: (
        "ProfileMode.HOST_MEMORY has no meaning on the virtual NeuronCore (no host_mem.pb is "
        "written); use torch.profiler.profile(profile_memory=True) for allocations."
    ),
}

_CORE_LIST = re.compile(r"^\s*\d+(\s*-\s*\d+)?(\s*,\s*\d+(\s*-\s*\d+)?)*\s*$")


def _parse_cores(spec: str | None) -> frozenset[int] | None:
    """'0,1,2-5' -> {0, 1, 2, 3, 4, 5}; None: every core."""
    if spec is None:
        return None
    if not isinstance(spec, str) or not _CORE_LIST.match(spec):
        raise ValueError(
            f"NeuronConfig(capture_enabled_for_nc={spec!r}): expected core ids and ranges "
            "such as '0,1,2-5'"
        )
    cores: set[int] = set()
    for part in spec.split(","):
        first, _, last = part.strip().partition("-")
        lo, hi = int(first), int(last or first)
        if hi < lo:
            raise ValueError(f"NeuronConfig(capture_enabled_for_nc={spec!r}): range {part} is reversed")
        cores.update(range(lo, hi + 1))
    return frozenset(cores)


class NeuronConfig(_ExperimentalConfig):
    """TorchNeuron's profiler options, accepted as `experimental_config`.

    Args:
        modes: ProfileMode values (default DEVICE and RUNTIME, as TorchNeuron).
        max_events_per_nc: keep at most this many device events per core in
            the exported trace (None: all).
        capture_enabled_for_nc: cores whose device track is exported, e.g. "0,1,2-5".
        profile_output_dir: where `NeuronProfiler.export_trace` writes.
        neff_cache_dir, precache_node_info: accepted; the virtual core has no NEFFs.
    """

    def __init__(
        self,
        modes=None,
        max_events_per_nc: int | None = None,
        capture_enabled_for_nc: str | None = None,
        profile_output_dir: str = "./neuron_profile",
        neff_cache_dir: str | None = None,
        precache_node_info: bool = True,
    ):
        super().__init__()
        modes = [ProfileMode.DEVICE, ProfileMode.RUNTIME] if modes is None else list(modes)
        for mode in modes:
            if not isinstance(mode, ProfileMode):
                raise TypeError(
                    f"NeuronConfig(modes=...): {mode!r} is not a ProfileMode; use one of "
                    + ", ".join(f"ProfileMode.{m.name}" for m in ProfileMode)
                )
        if max_events_per_nc is not None and (
            not isinstance(max_events_per_nc, int) or max_events_per_nc < 1
        ):
            raise ValueError(
                f"NeuronConfig(max_events_per_nc={max_events_per_nc!r}): expected a positive int or None"
            )
        self.modes = modes
        self.max_events_per_nc = max_events_per_nc
        self.capture_enabled_for_nc = capture_enabled_for_nc
        self.cores = _parse_cores(capture_enabled_for_nc)
        self.profile_output_dir = str(profile_output_dir)
        self.neff_cache_dir = neff_cache_dir
        self.precache_node_info = precache_node_info
        for mode in modes:
            note = _VIRTUAL_CORE_NOTE[mode]
            if note is not None:
                warnings.warn(note, UserWarning, stacklevel=2)

    @property
    def device_track(self) -> bool:
        """Whether the estimated device track is wanted (ProfileMode.DEVICE)."""
        return ProfileMode.DEVICE in self.modes


class NeuronProfiler:
    """`on_trace_ready` target that writes the trace under `profile_output_dir`."""

    def __init__(self, config: NeuronConfig | None = None):
        self.config = config if config is not None else NeuronConfig(modes=[ProfileMode.DEVICE])
        self.written: list[str] = []

    def export_trace(self, prof) -> str:
        """Write `prof`'s Chrome trace (CPU track + estimated device track); return its path."""
        from ._trace_file import filter_device_events

        os.makedirs(self.config.profile_output_dir, exist_ok=True)
        step = getattr(prof, "step_num", 0)
        path = os.path.join(
            self.config.profile_output_dir,
            f"{socket.gethostname()}_{os.getpid()}.{step}.pt.trace.json",
        )
        prof.export_chrome_trace(path)
        filter_device_events(path, self.config)
        self.written.append(path)
        return path
