"""The per-process stats registry: one small mapped file per process.

Writer: the C++ core (csrc/stats_page.cpp) creates `<runtime dir>/<pid>.stats`
on the first use of a core and updates it in place with relaxed atomic stores
and adds (no locks, no system calls on the hot path); it removes the file at
normal exit. `publish_process()` hands it the path and this process's metadata
when the runtime starts.

Reader: `list_processes()` maps each file read-only and returns live entries.
A file whose magic or version is wrong, whose metadata does not parse, or
whose pid is dead or was reused (start time differs) is skipped: crashed
processes leave their file behind and must not show up.

Layout (little-endian), shared with csrc/tools_core.h:
  0  u64 magic "NNRSTAT1"   8 u32 version   12 u32 device slots   16 i64 pid
  64 .. 4096  metadata, UTF-8 JSON, NUL-terminated
  4096 + 128 * device: int64 fields DEVICE_FIELDS (device = local index)
"""
from __future__ import annotations

import json
import mmap
import os
import struct
import sys
from dataclasses import dataclass, field
from pathlib import Path

MAGIC = 0x3154415453524E4E
VERSION = 1
META_OFFSET, META_SIZE = 64, 4096 - 64
DEVICE_OFFSET, DEVICE_STRIDE, MAX_DEVICES = 4096, 128, 128
PAGE_BYTES = DEVICE_OFFSET + DEVICE_STRIDE * MAX_DEVICES
DEVICE_FIELDS = ("used", "allocated", "allocated_peak", "reserved", "reserved_peak", "busy_ns", "ops",
                 "graphs", "estimated_flops")
FIELD_INDEX = {name: i for i, name in enumerate(DEVICE_FIELDS)}
from ...runtime.env import RUNTIME_DIR


def runtime_dir() -> Path:
    """The per-user runtime folder: $TORCH_NEURONX_RUNTIME_DIR, else
    $XDG_RUNTIME_DIR/torch-neuronx, else /tmp/torch-neuronx-<uid>."""
    explicit = os.environ.get(RUNTIME_DIR, "").strip()
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_RUNTIME_DIR", "").strip()
    if xdg and os.path.isdir(xdg) and os.access(xdg, os.W_OK):
        return Path(xdg) / "torch-neuronx"
    return Path(f"/tmp/torch-neuronx-{os.getuid()}")


def process_start_ticks(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot (/proc/<pid>/stat field 22), None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    rest = data[data.rfind(b")") + 2:].split()
    try:
        return int(rest[19])
    except (IndexError, ValueError):
        return None


@dataclass
class ProcessEntry:
    """One live process using the virtual NeuronCores."""
    pid: int
    command: str
    runtime_version: str
    meta: dict
    # local device index -> {field: value}; only the cores the process used
    devices: dict[int, dict[str, int]] = field(default_factory=dict)
    path: Path | None = None

    def global_core(self, local: int) -> int:
        """Instance-wide logical core index of the process's neuron:<local>."""
        cores = self.meta.get("cores", [])
        return cores[local] if local < len(cores) else local

    def chip_of(self, local: int) -> int:
        chips = self.meta.get("chips", [])
        return chips[local] if local < len(chips) else 0


def read_entry(path: Path) -> ProcessEntry | None:
    """The entry in `path`, or None when it is corrupt, stale or of a dead process."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size < PAGE_BYTES:
                return None
            with mmap.mmap(f.fileno(), PAGE_BYTES, access=mmap.ACCESS_READ) as m:
                magic, version, slots, pid = struct.unpack_from("<QIIq", m, 0)
                if magic != MAGIC or version != VERSION or slots > MAX_DEVICES:
                    return None
                raw = bytes(m[META_OFFSET:META_OFFSET + META_SIZE]).split(b"\0", 1)[0]
                meta = json.loads(raw.decode("utf-8"))
                if not isinstance(meta, dict) or meta.get("pid") != pid:
                    return None
                count = min(len(meta.get("cores", [])), slots)
                devices = {}
                for d in range(count):
                    values = struct.unpack_from(f"<{len(DEVICE_FIELDS)}q", m, DEVICE_OFFSET + d * DEVICE_STRIDE)
                    if values[0]:
                        devices[d] = dict(zip(DEVICE_FIELDS, values))
    except (OSError, ValueError, struct.error, UnicodeDecodeError):
        return None
    ticks = process_start_ticks(pid)
    if ticks is None or ticks != meta.get("start_ticks"):
        return None  # dead, or the pid now belongs to another process
    return ProcessEntry(pid=pid, command=str(meta.get("command", "")),
                        runtime_version=str(meta.get("runtime_version", "")), meta=meta,
                        devices=devices, path=path)


def list_processes(directory: Path | None = None) -> list[ProcessEntry]:
    """Live processes of the registry, by pid. A missing folder is an empty list."""
    folder = Path(directory) if directory is not None else runtime_dir()
    try:
        names = sorted(p for p in folder.iterdir() if p.suffix == ".stats")
    except OSError:
        return []
    entries = [e for e in (read_entry(p) for p in names) if e is not None]
    return sorted(entries, key=lambda e: e.pid)


def remove_dead(directory: Path) -> None:
    """Delete the files of dead processes (called by a new writer, never on a hot path)."""
    try:
        paths = list(directory.glob("*.stats"))
    except OSError:
        return
    for p in paths:
        try:
            pid = int(p.stem)
        except ValueError:
            continue
        if pid != os.getpid() and process_start_ticks(pid) is None:
            try:
                p.unlink()
            except OSError:
                pass


def publish_process(core, topology) -> None:
    """Tell the core where this process's page goes and what it says about the process.
    Cheap: one mkdir and one /proc read; the page itself is created on first use."""
    from ... import __version__

    folder = runtime_dir()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return  # no folder, no page: the tools are observers
    remove_dead(folder)
    pid = os.getpid()
    meta = {
        "pid": pid,
        "start_ticks": process_start_ticks(pid),
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv)[:512],
        "runtime_version": f"torch-neuronx {__version__} (virtual)",
        "instance_type": topology.instance.name,
        "lnc": topology.lnc,
        "cores": [c.global_index for c in topology.cores],
        "chips": [c.chip_index for c in topology.cores],
        "rank": os.environ.get("RANK"),
        "local_rank": os.environ.get("LOCAL_RANK"),
    }
    core._configure_stats_page(str(folder / f"{pid}.stats"), json.dumps(meta))


def add(device: int, name: str, value: int = 1) -> None:
    """Add to a field of this process's page (no-op before the page exists)."""
    from ... import _C

    _C._stats_add(device, FIELD_INDEX[name], int(value))
