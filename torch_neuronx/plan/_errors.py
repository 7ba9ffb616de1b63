"""The dry run's own error, in a file of its own so the dispatch mode (_mode.py) and the host-sync
counter (_syncs.py) both raise it without importing each other."""
from __future__ import annotations


class DryRunError(RuntimeError):
    """A dry run met something it cannot do without real values (the message says what to change)."""
