"""Replace a function we do not own by a wrapper around it, exactly once.

The adapters (integrations/) and the compiler wrap functions of torch, transformers, accelerate and
safetensors. Installing twice (a reloaded module, a second `install()`) must not wrap the wrapper, so
each wrapper carries a tag.
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

_TAG = "_torch_neuronx"


def is_wrapped(fn) -> bool:
    return getattr(fn, _TAG, False)


def wrap_once(owner, name: str, make: Callable[[Callable], Callable]):
    """Set `owner.<name>` to `make(original)` (with the original's name and docstring); a static method
    stays a static method.

    Returns the wrapper, or None when `owner.<name>` is already one of ours.
    """
    original = getattr(owner, name)
    if is_wrapped(original):
        return None
    wrapper = functools.wraps(original)(make(original))
    setattr(wrapper, _TAG, True)
    static = isinstance(inspect.getattr_static(owner, name), staticmethod)
    setattr(owner, name, staticmethod(wrapper) if static else wrapper)
    return wrapper
