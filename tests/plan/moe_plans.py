"""Plan MoE layouts in one dry-run process: `python -m tests.plan.moe_plans SPEC.json OUT.json`, SPEC a
list of {"command": "train"|"deployed", "config": path, "layout": {make_layout kwargs}, "args": {...},
"assumptions": "name=value,..." (the cost model's, for this plan only)}. Run with TORCH_NEURONX_DRY_RUN=1,
TORCH_NEURONX_INSTANCE_TYPE and NEURON_LOGICAL_NC_CONFIG set; tests call `plan_in_child`, which does."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def plan_in_child(specs: list, tmp: Path) -> list:
    """Plan `specs` in one dry-run child process on a trn2.3xlarge at LNC 1; the plans' reports, in order."""
    spec_path, out = tmp / "spec.json", tmp / "out.json"
    spec_path.write_text(json.dumps(specs))
    env = dict(os.environ, TORCH_NEURONX_DRY_RUN="1", TORCH_NEURONX_INSTANCE_TYPE="trn2.3xlarge",
               NEURON_LOGICAL_NC_CONFIG="1", TORCH_NEURONX_DRY_RUN_REPORT=os.devnull)
    env.pop("TORCH_NEURONX_ESTIMATE_ASSUMPTIONS", None)
    p = subprocess.run([sys.executable, "-m", "tests.plan.moe_plans", str(spec_path), str(out)], env=env,
                       capture_output=True, text=True, timeout=900, cwd=REPO)
    assert p.returncode == 0, (p.stdout + p.stderr)[-4000:]
    return json.loads(out.read_text())


def main(spec_path: str, out_path: str) -> None:
    import torch

    from torch_neuronx.plan.models import make_layout, plan_train
    from torch_neuronx.plan.models._deployed import plan_deployed
    from torch_neuronx.plan.models._load_config import load_config
    from torch_neuronx.runtime import env

    results = []
    for spec in json.load(open(spec_path)):
        config = load_config(spec["config"])
        layout = make_layout(**spec["layout"])
        os.environ.pop(env.ESTIMATE_ASSUMPTIONS, None)
        if spec.get("assumptions"):
            os.environ[env.ESTIMATE_ASSUMPTIONS] = spec["assumptions"]
        if spec["command"] == "train":
            results.append(plan_train(config, layout, **spec.get("args", {}), dtype=torch.bfloat16, dry_run=True))
        else:
            results.append(plan_deployed(config, layout, **spec.get("args", {}), dtype=torch.bfloat16))
    with open(out_path, "w") as f:
        json.dump(results, f, default=str)


if __name__ == "__main__":
    main(*sys.argv[1:3])
