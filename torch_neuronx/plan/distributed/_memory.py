"""Whether a tensor has real bytes behind it in this dry run (so the fake group may copy into it).

CPU tensors always do, and neuron tensors in a dry run on real device memory. With phantom device
memory (TORCH_NEURONX_DRY_RUN=1 from the start of the process) a neuron storage smaller than the
dry run's large-op threshold (plan/_dry_run_env.py `large_bytes`) is real too: the dry-run mode writes
such tensors itself. Larger ones must never be written, so that no host page backs them.
"""
from __future__ import annotations

import torch

from ...estimate.aten_schema import storage_bytes


def backed(t: torch.Tensor) -> bool:
    if t.device.type != "neuron":
        return True
    from ... import _C
    from .. import _dry_run_env as config

    return not _C._allocator_phantom() or storage_bytes(t) < config.large_bytes()
