"""One step measured in a fresh process (`python -m tests.plan.compiled_step real|dry|eager-real|eager-dry`): a wide
MLP's forward and backward, whose peak is intermediates that Inductor fuses away and reuses. Prints
{"peak", "ops", "graphs"} as JSON. A fresh process: in a test process, what earlier tests left (and
the garbage collector frees at some point of the step) moved the in-process peak by 1.5%."""
from __future__ import annotations

import json
import sys

import torch


def _wide_mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.GELU(), torch.nn.Linear(512, 512),
                               torch.nn.GELU(), torch.nn.Linear(512, 64)).to("neuron")


def step() -> None:
    compiled = torch.compile(_wide_mlp(), backend="neuron")
    compiled(torch.randn(256, 64, device="neuron")).float().pow(2).mean().backward()


def eager_step() -> None:
    from tests.plan.test_exact import _model, _train

    _train(_model())


if __name__ == "__main__":
    from tests.plan.test_exact import _measure

    # real|dry: the compiled step; eager-real|eager-dry: test_exact's eager training step
    mode = sys.argv[1]
    peak, ops, graphs = _measure(eager_step if mode.startswith("eager-") else step, dry=mode.endswith("dry"))
    print(json.dumps({"peak": peak, "ops": ops, "graphs": graphs}))
