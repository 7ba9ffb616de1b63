"""Plan several layouts of one config in one dry-run process (the runtime's instance and LNC are
fixed when it starts): `python -m tests.plan.layout_plans SPEC.json OUT.json`, SPEC a list of
{"command": "train"|"generate", "config": path, "layout": {make_layout kwargs}, "args": {...}}.
Run with TORCH_NEURONX_DRY_RUN=1, TORCH_NEURONX_INSTANCE_TYPE and NEURON_LOGICAL_NC_CONFIG set."""
from __future__ import annotations

import json
import sys

import torch

from torch_neuronx.plan.models import make_layout, plan_generate, plan_train
from torch_neuronx.plan.models._load_config import load_config


def main(spec_path: str, out_path: str) -> None:
    results = []
    for spec in json.load(open(spec_path)):
        config = load_config(spec["config"])
        layout = make_layout(**spec["layout"])
        args = dict(spec.get("args", {}), dtype=torch.bfloat16, dry_run=True)
        plan = plan_train if spec["command"] == "train" else plan_generate
        results.append(plan(config, layout, **args))
    with open(out_path, "w") as f:
        json.dump(results, f, default=str)


if __name__ == "__main__":
    main(*sys.argv[1:3])
