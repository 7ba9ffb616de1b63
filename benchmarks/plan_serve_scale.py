"""`plan serve` at full size: 200 requests on Llama-3.3-70B at TP 64 on trn2.48xlarge, wall time and
peak memory of the planning processes against the targets (5 minutes, 4 GB on the planning host).

Run in vLLM's environment (docs/serving.md):

    .venv-vllm/bin/python benchmarks/plan_serve_scale.py [--model Llama-3.3-70B] [--num-prompts 200]

The model's dimensions are its public config.json's (torch_neuronx/plan/calibration/models.json);
nothing is downloaded and no weight is allocated (phantom memory). Peak memory is the largest
resident set of the processes the command ran (the plan and its child on the instance's runtime).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(REPO, "torch_neuronx", "plan", "calibration", "models.json")
TARGET_S, TARGET_BYTES = 300, 4e9


def config_folder(model: str) -> str:
    with open(MODELS) as f:
        config = {k: v for k, v in json.load(f)[model].items() if k != "source"}
    folder = tempfile.mkdtemp(prefix="plan-serve-bench-")
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    return folder


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="Llama-3.3-70B", help="a model of calibration/models.json")
    p.add_argument("--instance", default="trn2.48xlarge")
    p.add_argument("--tp", type=int, default=64)
    p.add_argument("--num-prompts", type=int, default=200)
    p.add_argument("--max-num-seqs", type=int, default=8)
    p.add_argument("--max-model-len", type=int, default=4096)
    p.add_argument("--request-rate", default="inf")
    args = p.parse_args()
    report = os.path.join(tempfile.mkdtemp(prefix="plan-serve-bench-"), "plan.json")
    command = [sys.executable, "-m", "torch_neuronx.plan", "serve", "--config", config_folder(args.model),
               "--instance", args.instance, "--tp", str(args.tp), "--max-num-seqs", str(args.max_num_seqs),
               "--max-model-len", str(args.max_model_len), "--num-prompts", str(args.num_prompts),
               "--input-tokens", "1500", "--output-tokens", "250", "--request-rate", args.request_rate,
               "--json", report, "-q"]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        print(done.stderr[-4000:], file=sys.stderr)
        return done.returncode
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024   # Linux: KiB
    with open(report) as f:
        r = json.load(f)
    b, e = r["bench_serve"], r["engine"]
    print(f"plan serve: {args.model} TP {args.tp} on {args.instance}, {args.num_prompts} requests of 1500 in / 250 out, "
          f"max-num-seqs {args.max_num_seqs}, max-model-len {args.max_model_len}, request rate {args.request_rate}")
    print(f"  planned: {b['completed']} completed, {b['output_throughput']:.1f} output tok/s, mean TTFT "
          f"{b['mean_ttft_ms']:.1f} ms, mean TPOT {b['mean_tpot_ms']:.2f} ms, {e['steps']:,} engine steps, "
          f"{len(r['graphs'])} graphs priced")
    print(f"  wall time {wall:.1f} s (target {TARGET_S} s: {wall / TARGET_S:.2f}x of it)")
    print(f"  peak RSS {peak / 1e9:.2f} GB (target {TARGET_BYTES / 1e9:.0f} GB: {peak / TARGET_BYTES:.2f}x of it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
