"""Is this process a dry run? (`TORCH_NEURONX_DRY_RUN=1`, set by `python -m torch_neuronx.plan run`
or by the user under their own launcher.) Read on each call: cheap, and tests may flip it."""
from __future__ import annotations

from ...runtime import env

DRY_RUN = "TORCH_NEURONX_DRY_RUN"


def dry_run() -> bool:
    return bool(env.parse_flag(DRY_RUN))
