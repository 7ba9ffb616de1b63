"""The user's line behind a device event: the innermost Python frame outside torch and torch_neuronx.

Numerics reports (numerics/report.py) and the dry run's host-sync and error sites (plan/_syncs.py)
name this line, so a user sees their own code, not the library frames that reached the op.
"""
from __future__ import annotations

import os
import sys

# The torch and torch_neuronx package folders (not the repository holding torch_neuronx: a user's
# script or test beside the package is a user site), and typing_extensions' @deprecated wrappers
# (all_reduce_coalesced goes through one).
_LIBRARY_PATHS = tuple(
    os.path.dirname(os.path.abspath(p)) + os.sep
    for p in (__import__("torch").__file__, os.path.abspath(__file__))
) + (os.path.abspath(__import__("typing_extensions").__file__),)


def user_site(depth: int = 1) -> str:
    """file:line of the innermost frame outside the libraries, starting `depth` frames up."""
    frame = sys._getframe(depth)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_LIBRARY_PATHS) and not filename.startswith("<frozen"):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<torch internals>"
