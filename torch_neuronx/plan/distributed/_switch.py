"""Is this process a dry run? The dry-run core's own switch (plan/_config.py, TORCH_NEURONX_DRY_RUN),
read on each call: cheap, and tests may flip it."""
from __future__ import annotations

from .._config import DRY_RUN, requested

__all__ = ["DRY_RUN", "dry_run", "dry_run_quiet"]


def dry_run() -> bool:
    """True under TORCH_NEURONX_DRY_RUN=1; a bad value raises the message that names the variable."""
    return requested()


def dry_run_quiet() -> bool:
    """As dry_run(), but False for a bad value (registration must not fail; plan.install warns)."""
    try:
        return requested()
    except Exception:  # noqa: BLE001
        return False
