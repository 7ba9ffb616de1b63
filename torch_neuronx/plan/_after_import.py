"""Run a function right after a module is first imported, without importing it first.

The plan's progress display, its notes and its generation marks hook libraries (Dynamo's compile
callbacks, transformers' logging, `generate`) only when the user's program imports them: importing
them eagerly would cost every plan seconds.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys


class AfterImport(importlib.abc.MetaPathFinder):
    """Runs `then(module)` right after `name` is first imported (and then leaves sys.meta_path)."""

    def __init__(self, name: str, then) -> None:
        self.name, self.then = name, then

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module, then, finder = spec.loader.exec_module, self.then, self

        def exec_then(module):
            exec_module(module)
            if finder in sys.meta_path:
                sys.meta_path.remove(finder)
            then(module)

        spec.loader.exec_module = exec_then
        return spec
