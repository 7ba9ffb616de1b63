"""The writer's side of the per-process stats page: its layout, where it lives, and what the
runtime publishes into it.

The C++ core (csrc/stats_page.cpp) creates `<runtime dir>/<pid>.stats` on the first use of a core
and updates it in place with relaxed atomic stores and adds (no locks, no system calls on the hot
path); it removes the file at normal exit. `publish_process()` hands it the path and this process's
metadata when the runtime starts; `add()` adds to a field (the cost model's estimated FLOPs).
The readers (neuron-ls, neuron-top, neuron-monitor) are in `torch_neuronx.tools.api.registry`.

Layout (little-endian), shared with csrc/tools_core.h:
  0  u64 magic "NNRSTAT1"   8 u32 version   12 u32 device slots   16 i64 pid
  64 .. 4096  metadata, UTF-8 JSON, NUL-terminated
  4096 + 128 * device: int64 fields DEVICE_FIELDS (device = local index)
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

MAGIC = 0x3154415453524E4E
VERSION = 1
META_OFFSET, META_SIZE = 64, 4096 - 64
DEVICE_OFFSET, DEVICE_STRIDE, MAX_DEVICES = 4096, 128, 128
PAGE_BYTES = DEVICE_OFFSET + DEVICE_STRIDE * MAX_DEVICES
DEVICE_FIELDS = ("used", "allocated", "allocated_peak", "reserved", "reserved_peak", "busy_ns", "ops",
                 "graphs", "estimated_flops")
FIELD_INDEX = {name: i for i, name in enumerate(DEVICE_FIELDS)}
from .env import RUNTIME_DIR


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


def proc_stat_fields(pid: int) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after the command name (field 3 on), None if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    return data[data.rfind(b")") + 2:].split()


def process_start_ticks(pid: int) -> int | None:
    """Start time of `pid` in clock ticks since boot (/proc/<pid>/stat field 22), None if gone."""
    rest = proc_stat_fields(pid)
    if rest is None:
        return None
    try:
        return int(rest[19])
    except (IndexError, ValueError):
        return None


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
    from .._version import __version__

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
    from .. import _C

    _C._stats_add(device, FIELD_INDEX[name], int(value))
