"""The hooks the distributed layer offers to the layers above it.

This layer never imports the planner, the cost model, numerics or the integrations: each of them
registers here when it installs (the always-on ones at startup, from torch_neuronx/_registration.py,
so every process has them: `plan run` children and torchrun ranks too). docs/architecture.md lists each hook with the layer that registers into it.

- group factory: a function (store, rank, size, timeout) -> process group or None, asked first
  when `backend="neuron"` builds a group (the dry run answers with its fake group, else None);
- group-class observers: called once with each neuron process-group class (the real one and the
  dry run's), those announced before the observer registered included (the cost model wraps
  their collectives to cost them inside `estimate()`);
- collective numerics: `prepare(name, opts, outputs, inputs)` -> (outputs, inputs, finish) for
  sum-reductions (Trainium numerics run integer sums through float32);
- import watcher: `when_imported(module name, hook)` (the integrations' post-import machinery), so
  this layer can adapt torch modules that load later without importing them.
"""
from __future__ import annotations

import sys
from datetime import timedelta
from typing import Callable, Optional

GroupFactory = Callable[[object, int, int, timedelta], Optional[object]]
Prepare = Callable[..., tuple]

_state: dict = {"group_factory": None, "numerics": None, "import_watcher": None}
_class_observers: list[Callable[[type], None]] = []
_group_classes: list[type] = []
_pending_imports: list[tuple[str, Callable]] = []   # asked for before a watcher registered


# ---- group factory ---------------------------------------------------------
def set_group_factory(factory: GroupFactory | None) -> None:
    """Register the function asked first for each new "neuron" group (None: no override)."""
    if factory is not None and not callable(factory):
        raise TypeError(f"set_group_factory(factory): expected a callable or None, got {type(factory).__name__}")
    _state["group_factory"] = factory


def group_override(store, rank: int, size: int, timeout: timedelta):
    """The registered factory's group, or None when there is none or it declines."""
    factory = _state["group_factory"]
    return None if factory is None else factory(store, rank, size, timeout)


# ---- group-class observers -------------------------------------------------
def on_group_class(observer: Callable[[type], None]) -> None:
    """Call `observer(cls)` for each neuron process-group class: now for those already announced,
    later for new ones. Registering the same observer twice is a no-op."""
    if not callable(observer):
        raise TypeError(f"on_group_class(observer): expected a callable, got {type(observer).__name__}")
    if observer in _class_observers:
        return
    _class_observers.append(observer)
    for cls in list(_group_classes):
        observer(cls)


def announce_group_class(cls: type) -> None:
    """A process-group class whose collectives the observers may watch (once per class)."""
    if cls in _group_classes:
        return
    _group_classes.append(cls)
    for observer in list(_class_observers):
        observer(cls)


# ---- collective numerics ---------------------------------------------------
def set_collective_numerics(prepare: Prepare | None) -> None:
    """Register the transform of sum-reductions (None: the transport's tensors as they are)."""
    if prepare is not None and not callable(prepare):
        raise TypeError(f"set_collective_numerics(prepare): expected a callable or None, got {type(prepare).__name__}")
    _state["numerics"] = prepare


def prepare_collective(name: str, opts, outputs: list, inputs=None):
    """(outputs, inputs, finish) for the transport; finish (or None) runs after the transfer."""
    prepare = _state["numerics"]
    if prepare is None:
        return outputs, inputs, None
    return prepare(name, opts, outputs, inputs)


# ---- import watcher --------------------------------------------------------
def set_import_watcher(when_imported: Callable[[str, Callable], None]) -> None:
    """Register `when_imported(name, hook)`; hooks asked for before it registered are handed over now."""
    if not callable(when_imported):
        raise TypeError(f"set_import_watcher(when_imported): expected a callable, got {type(when_imported).__name__}")
    _state["import_watcher"] = when_imported
    pending, _pending_imports[:] = list(_pending_imports), []
    for name, hook in pending:
        when_imported(name, hook)


def when_imported(name: str, hook: Callable) -> None:
    """Call `hook(module)` once module `name` is imported, through the registered watcher. Without
    one yet: now if the module is already imported, else when a watcher registers."""
    watcher = _state["import_watcher"]
    if watcher is not None:
        watcher(name, hook)
    elif sys.modules.get(name) is not None:
        hook(sys.modules[name])
    else:
        _pending_imports.append((name, hook))
