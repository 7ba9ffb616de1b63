"""The models of the numerics sweep (numerics/sweep.py): a runner the compatibility sweep registers at
startup (torch_neuronx/compat/_numerics_sweep.py), since numerics does not import the layer above it.

A module of its own, not a name in sweep.py: `python -m torch_neuronx.numerics.sweep` runs sweep.py as
`__main__`, a second copy of that module, which would not see a registration made at startup.
"""
from __future__ import annotations

from typing import Callable

_runner: list[Callable[[str, str], None]] = []


def set_model_runner(run_model: Callable[[str, str], None]) -> None:
    """Register `run_model(arch, device)`: build architecture `arch` tiny and run it on `device`."""
    if not callable(run_model):
        raise TypeError(f"set_model_runner(run_model): expected a callable, got {type(run_model).__name__}")
    _runner[:] = [run_model]


def model_runner() -> Callable[[str, str], None]:
    if not _runner:
        raise RuntimeError("the numerics sweep has no model runner: torch_neuronx did not register "
                           "(see the warning printed at `import torch`)")
    return _runner[0]
