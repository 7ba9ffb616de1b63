"""The per-process stats registry, read side: one small mapped file per process.

Each process using the virtual NeuronCores writes its page (`torch_neuronx.runtime.stats_page`:
layout, location, writer). `list_processes()` maps each file read-only and returns live entries.
A file whose magic or version is wrong, whose metadata does not parse, or whose pid is dead or was
reused (start time differs) is skipped: crashed processes leave their file behind and must not show up.
"""
from __future__ import annotations

import json
import mmap
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from ...runtime.stats_page import (DEVICE_FIELDS, DEVICE_OFFSET, DEVICE_STRIDE, FIELD_INDEX,  # noqa: F401
                                   MAGIC, MAX_DEVICES, META_OFFSET, META_SIZE, PAGE_BYTES, VERSION,
                                   process_start_ticks, runtime_dir)


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
