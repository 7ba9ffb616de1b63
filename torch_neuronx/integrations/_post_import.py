"""Run a function right after a module is imported (or now, if it already is).

Used to adapt third-party libraries at their seams without editing them and without importing them
early: `import torch` stays cheap, and a library that is never imported is never touched.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from typing import Callable

_hooks: dict[str, list[Callable]] = {}
_lock = threading.Lock()


class _Loader(importlib.abc.Loader):
    def __init__(self, wrapped, name: str):
        self._wrapped = wrapped
        self._name = name

    def create_module(self, spec):
        return self._wrapped.create_module(spec)

    def exec_module(self, module):
        self._wrapped.exec_module(module)
        _run(self._name, module)

    def __getattr__(self, item):  # get_source, is_package, ... of the real loader
        return getattr(self._wrapped, item)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname not in _hooks:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, fullname)
                return spec
        return None


_finder = _Finder()


def _run(name: str, module) -> None:
    with _lock:
        hooks = _hooks.pop(name, [])
    for hook in hooks:
        try:
            hook(module)
        except Exception as exc:  # an adapter must never break the library's import
            import warnings

            warnings.warn(f"torch_neuronx: could not adapt {name} ({type(exc).__name__}: {exc})", RuntimeWarning)


def when_imported(name: str, hook: Callable) -> None:
    """Call `hook(module)` once `name` has been imported (immediately if it already has)."""
    module = sys.modules.get(name)
    if module is not None and getattr(getattr(module, "__spec__", None), "_initializing", False) is False:
        _hooks.setdefault(name, []).append(hook)
        _run(name, module)
        return
    with _lock:
        _hooks.setdefault(name, []).append(hook)
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)
