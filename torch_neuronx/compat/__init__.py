"""Architecture compatibility sweep: every causal-LM architecture of transformers, built tiny from its
config class, run on neuron (eager, and static-cache decode compiled with backend "neuron") and on CPU.

    python -m torch_neuronx.compat [--workers 2] [--timeout 300] [--archs llama,gpt2] [--out docs/compat-report]

Modules: `worker` (one architecture, in a long-lived worker process), `sweep` (the pool of workers, per
architecture timeout, replacement of hung or crashed workers), `report` (pass rules, markdown and JSON).

Public: the two commands, `python -m torch_neuronx.compat` and `python -m torch_neuronx.compat.diffusers`
(docs/compat-report.md, docs/diffusers.md); the package exports no Python names (``__all__`` is empty) and
its modules are internal.
"""

__all__: list[str] = []
