"""Tensor parallelism for the other TP-capable transformers (Qwen-Image, FLUX, FLUX.2), 2 ranks under torchrun.

One launch runs tests/diffusers/tp_transformers_worker.py: each tiny transformer (the compatibility suite's
configs) is loaded with the real `from_pretrained(..., parallel_config=TensorParallelConfig(mesh=
DeviceMesh("neuron", [0, 1])))` and its output on every rank is compared with the same model whole on one
NeuronCore. Qwen-Image also runs with its blocks compiled (all-reduces inside the block graph).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.diffusers.helpers import REPO, _free_port

WORKER = os.path.join(REPO, "tests", "diffusers", "tp_transformers_worker.py")
WORLD = 2
ATOL = 1e-5      # fp32: sharded matmuls + sum all-reduce reorder additions (measured ~3e-7)

# per model: rowwise layers in the tiny config (= sum all-reduces per forward), and parameters the plan
# turns into DTensors (planned weights, plus their biases where the linears have one)
EXPECTED = {
    # 2 blocks x (to_out.0, to_add_out, img_mlp.net.2, txt_mlp.net.2); 12 planned linears x 2 blocks, with bias
    "qwenimage": dict(allreduce=8, dtensors=48),
    # double block: to_out.0, to_add_out, ff.net.2, ff_context.net.2; single block: packed proj_out; with bias
    "flux": dict(allreduce=5, dtensors=34),
    # the same 4 + 1 rowwise layers; bias-free linears
    "flux2": dict(allreduce=5, dtensors=14),
}


def test_tp_two_ranks_matches_single_core(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={WORLD}", "--rdzv-backend=c10d",
           f"--rdzv-endpoint=127.0.0.1:{_free_port()}", "--max-restarts=0", "--monitor-interval=0.5",
           WORKER, "--workdir", str(tmp_path), "--compile-model", "qwenimage"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for rank in range(WORLD):
        records = {r["model"]: r for r in json.loads((tmp_path / f"rank{rank}.json").read_text())}
        assert sorted(records) == sorted(EXPECTED)
        for name, want in EXPECTED.items():
            r = records[name]
            assert r["out_device"] == f"neuron:{rank}" and r["out_type"] == "Tensor", r
            assert r["ref_abs_max"] > 0.1, r                     # a real output, not zeros
            assert r["max_abs_diff"] < ATOL, r                   # TP output == single-core output
            assert r["load_collectives"] == {}, r                # slices read from disk, no weight traffic
            assert r["forward_collectives"] == {"allreduce": want["allreduce"]}, r
            assert r["dtensor_params"] == want["dtensors"], r
        compiled = records["qwenimage"]
        # both blocks share one graph; the all-reduces run inside it
        assert compiled["graphs_compiled"] == 1 and compiled["graph_breaks"] == 0, compiled
        assert compiled["compiled_collectives"] == {"allreduce": 8}, compiled
        assert compiled["compiled_max_diff"] < ATOL, compiled
