"""The compatibility sweep's tiny models, lent to the numerics sweep (`python -m torch_neuronx.numerics.sweep`).

numerics (a lower layer) does not import the compatibility sweep: it offers `set_model_runner`, and
`install()` here registers `run_model` at startup (torch_neuronx/_registration.py). The worker, and with it
transformers, is imported only when a model runs.
"""
from __future__ import annotations


def run_model(arch: str, device: str = "neuron") -> None:
    """Build `arch` tiny from its config (worker._build: same configs, same inputs as the compatibility sweep),
    run an eager forward and a short greedy generate on `device`."""
    from . import worker

    model, config, _ = worker._build(arch)
    model = model.to(device)
    worker._forward(model, config, device)
    worker._generate(model, config, device, static=False)


def install() -> None:
    from ..numerics import set_model_runner

    set_model_runner(run_model)
