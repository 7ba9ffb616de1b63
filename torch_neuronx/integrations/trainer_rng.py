"""Neuron RNG state in transformers Trainer checkpoints.

`Trainer._save_rng_state` writes python/numpy/cpu RNG states plus those of the accelerators it knows
(cuda, xla, npu, hpu, mlu, musa) to `rng_state.pth` (`rng_state_{rank}.pth` when world_size > 1), and
`Trainer._load_rng_state` restores them on `resume_from_checkpoint`. Neuron is not among them, so dropout
and any other neuron-side randomness would not continue where the interrupted run stopped.

This adapter wraps both methods (their bodies are the library's): when the Trainer's device is neuron, the
file the original just wrote gains a "neuron" entry (`torch.neuron.get_rng_state_all()`), and after the
original has restored its states, the "neuron" entry is restored with `torch.neuron.set_rng_state_all`.
Other devices are untouched.
"""
from __future__ import annotations

import logging
import os

from .._wrap import wrap_once

logger = logging.getLogger(__name__)

NEURON_KEY = "neuron"


def _on_neuron(trainer) -> bool:
    device = getattr(trainer.args, "device", None)
    return device is not None and device.type == "neuron"


def rng_file(trainer, checkpoint_dir: str) -> str:
    """The file the Trainer writes/reads for this process (same naming rule as transformers)."""
    if trainer.args.world_size <= 1:
        return os.path.join(checkpoint_dir, "rng_state.pth")
    return os.path.join(checkpoint_dir, f"rng_state_{trainer.args.process_index}.pth")


def _add_neuron_state(path: str) -> None:
    import torch

    # The file was written by this process a moment ago, so a full (non weights-only) load is safe; it
    # holds python and numpy RNG tuples that weights_only would need allow-listing for.
    states = torch.load(path, weights_only=False)
    states[NEURON_KEY] = torch.neuron.get_rng_state_all()
    torch.save(states, path)


def _restore_neuron_state(path: str) -> None:
    import torch
    from transformers.trainer_pt_utils import safe_globals

    with safe_globals():  # the checkpoint may come from elsewhere: weights-only, as transformers loads it
        states = torch.load(path, weights_only=True)
    saved = states.get(NEURON_KEY)
    if saved is None:
        logger.info("%s has no neuron RNG state (saved on another device or before torch_neuronx added it); "
                    "neuron random numbers will not continue the interrupted run.", path)
        return
    count = torch.neuron.device_count()
    if len(saved) != count:
        logger.warning("%s holds neuron RNG states for %d NeuronCore(s) but this process sees %d; restoring "
                       "the first %d.", path, len(saved), count, min(len(saved), count))
    torch.neuron.set_rng_state_all(saved[:count])


def patch(module) -> None:
    """Wrap `transformers.trainer.Trainer._save_rng_state` and `_load_rng_state`."""
    def make_save(original_save):
        def _save_rng_state(self, output_dir: str) -> None:
            original_save(self, output_dir)
            if _on_neuron(self):
                _add_neuron_state(rng_file(self, output_dir))

        return _save_rng_state

    def make_load(original_load):
        def _load_rng_state(self, checkpoint: str | None) -> None:
            original_load(self, checkpoint)
            if checkpoint is None or not _on_neuron(self):
                return
            path = rng_file(self, checkpoint)
            if os.path.isfile(path):  # the original already logged a missing file
                _restore_neuron_state(path)

        return _load_rng_state

    wrap_once(module.Trainer, "_save_rng_state", make_save)
    wrap_once(module.Trainer, "_load_rng_state", make_load)
