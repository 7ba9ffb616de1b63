"""Whether a tensor has real bytes behind it in this dry run (so the fake group may copy into it).

CPU tensors always do. Neuron tensors do unless the dry run's phantom device memory is on (the
allocator charges their bytes to the core without backing them): then nothing may read or write them.
"""
from __future__ import annotations

import torch


def phantom_memory() -> bool:
    """True when neuron tensors of this process have no host memory behind them."""
    probe = _probe()
    return bool(probe()) if probe is not None else False


def backed(t: torch.Tensor) -> bool:
    return t.device.type != "neuron" or not phantom_memory()


def _probe():
    """The dry-run core's own answer, where it offers one (torch_neuronx.plan.dry_run)."""
    try:
        from .. import dry_run  # the dry-run core (branch p1-dryrun)
    except ImportError:
        return None
    return getattr(dry_run, "phantom_memory_active", None)
