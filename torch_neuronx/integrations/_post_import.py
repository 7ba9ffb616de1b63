"""Run a function right after a module is imported (or now, if it already is).

Used to adapt third-party libraries at their seams without editing them and without importing them
early: `import torch` stays cheap, and a library that is never imported is never touched.

A module can be in one of three states when a hook is registered, and each needs its own trigger:
* imported: run the hook now;
* not imported yet: a meta-path finder wraps its loader, and the hook runs after `exec_module`;
* *being* imported. This is the common case, not a corner: `import accelerate` (or `from trl import ...`)
  as a script's first line imports torch from inside `accelerate.accelerator`, torch's autoload registers
  these hooks, and `accelerate.accelerator` is already in `sys.modules`, half-executed, past the finder.
  Here the hook must wait until its body finishes. importlib marks that moment itself: `_load_unlocked`
  sets `module.__spec__._initializing = False` once `exec_module` returned (and, on failure, after the
  module left `sys.modules`). `_watch` turns that assignment into the trigger by giving the spec a
  subclass whose `_initializing` is a property, then restores its class.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from typing import Callable

_hooks: dict[str, list[Callable]] = {}
_lock = threading.RLock()


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


class _Watched:
    """Mixed into the spec class of a module being imported: runs the module's hooks when importlib marks
    it initialised, then gives the spec its own class back."""

    @property
    def _initializing(self):
        return self.__dict__.get("_initializing", False)

    @_initializing.setter
    def _initializing(self, value):
        self.__dict__["_initializing"] = value
        if value:
            return
        self.__class__ = self._plain_class
        module = sys.modules.get(self.name)
        if module is not None:  # absent: the import failed; the finder stays for a retry
            _run(self.name, module)


_watched_classes: dict[type, type] = {}


def _initializing(module) -> bool:
    return getattr(getattr(module, "__spec__", None), "_initializing", False) is True


def _watch(module) -> bool:
    """Make the end of `module`'s import run its hooks; False if its spec cannot be watched."""
    spec = module.__spec__
    plain = type(spec)
    if issubclass(plain, _Watched):
        return True
    watched = _watched_classes.get(plain)
    if watched is None:
        watched = type(f"Watched{plain.__name__}", (_Watched, plain), {"_plain_class": plain})
        _watched_classes[plain] = watched
    try:
        spec.__class__ = watched
    except TypeError:  # a spec class with its own layout (__slots__): cannot be swapped
        return False
    return True


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
    """Call `hook(module)` once `name` has been imported (immediately if it already has), whatever the
    import order: also when `name` is importing torch right now."""
    with _lock:
        _hooks.setdefault(name, []).append(hook)
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)
        module = sys.modules.get(name)
        if module is None:
            return
        if _initializing(module) and _watch(module):
            return
    if _initializing(module):  # an unwatchable spec: adapting a half-built module beats never adapting it
        import warnings

        warnings.warn(f"torch_neuronx: {name} is still being imported and its import cannot be watched; "
                      "adapting it before its body has finished.", RuntimeWarning)
    _run(name, module)
