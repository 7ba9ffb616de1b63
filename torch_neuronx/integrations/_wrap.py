"""Replace a library function by a wrapper around it, exactly once.

Every adapter here wraps a function of a library it does not own. Installing twice (a reloaded
module, a second `install()`) must not wrap the wrapper, so each wrapper carries a tag.
"""
from __future__ import annotations

import functools
from collections.abc import Callable

_TAG = "_torch_neuronx"


def is_wrapped(fn) -> bool:
    return getattr(fn, _TAG, False)


def wrap_once(owner, name: str, make: Callable[[Callable], Callable]):
    """Set `owner.<name>` to `make(original)` (with the original's name and docstring).

    Returns the wrapper, or None when `owner.<name>` is already one of ours.
    """
    original = getattr(owner, name)
    if is_wrapped(original):
        return None
    wrapper = functools.wraps(original)(make(original))
    setattr(wrapper, _TAG, True)
    setattr(owner, name, wrapper)
    return wrapper
