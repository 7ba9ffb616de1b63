"""Data API of the Neuron tools (no terminal code here).

Names load on first use: the tools import what they show, nothing more.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "CoreRate": "collector", "ProcessRate": "collector", "Sample": "collector", "rates": "collector",
    "take_sample": "collector", "ChipView": "devices", "InstanceView": "devices", "instance_view": "devices",
    "DEVICE_FIELDS": "registry", "ProcessEntry": "registry", "list_processes": "registry",
    "runtime_dir": "registry",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = sorted(_EXPORTS)
