"""`plan serve` (vLLM's scheduler on the estimated step times) against `plan generate --concurrency`
(the closed-form continuous-batching schedule of plan/models/_serving.py), same model, layout and
requests: a markdown table of TTFT, TPOT and output tokens/s of both.

Run in vLLM's environment (docs/serving.md), where both commands run:

    .venv-vllm/bin/python benchmarks/plan_serve_vs_generate.py [--concurrency 1,8,32]

Each row: 1500 input and 250 output tokens per request, max-model-len 2048 for both plans;
`plan serve` sends 4 x N requests at once with --max-concurrency N and --max-num-seqs N (N in
flight, as plan generate's closed loop keeps them), `plan generate --concurrency N`. The models'
dimensions are their public config.json's (torch_neuronx/plan/calibration/models.json).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plan_serve_scale import config_folder  # noqa: E402

CASES = (("Llama-3.1-8B", "trn2.3xlarge", 4), ("Llama-3.3-70B", "trn2.48xlarge", 64))
INPUT, OUTPUT, MAX_LEN = 1500, 250, 2048


def _run(args: list[str]) -> dict:
    out = os.path.join(tempfile.mkdtemp(prefix="plan-compare-"), "plan.json")
    done = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", *args, "--json", out, "-q"], cwd=REPO,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stderr[-3000:]}")
    with open(out) as f:
        return json.load(f)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--concurrency", default="1,8,32", help="requests in flight, separated by commas")
    p.add_argument("--models", default=",".join(c[0] for c in CASES), help="of: " + ", ".join(c[0] for c in CASES))
    args = p.parse_args()
    wanted = args.models.split(",")
    print("| model | TP, instance | N | TTFT ms serve (p99) | TTFT ms generate | TPOT ms serve | TPOT ms generate "
          "| output tok/s serve | output tok/s generate |")
    print("|---|---|---|---|---|---|---|---|---|")
    for model, instance, tp in (c for c in CASES if c[0] in wanted):
        folder = config_folder(model)
        common = ["--config", folder, "--instance", instance, "--tp", str(tp), "--input-tokens", str(INPUT),
                  "--output-tokens", str(OUTPUT), "--max-model-len", str(MAX_LEN)]
        for n in (int(x) for x in args.concurrency.split(",")):
            serve = _run(["serve", *common, "--max-num-seqs", str(n), "--max-concurrency", str(n),
                          "--num-prompts", str(4 * n)])["bench_serve"]
            generate = _run(["generate", *common, "--concurrency", str(n)])
            print(f"| {model} | TP {tp}, {instance} | {n} | {serve['mean_ttft_ms']:.1f} ({serve['p99_ttft_ms']:.1f}) "
                  f"| {generate['ttft_ms']:.1f} | {serve['mean_tpot_ms']:.2f} | {generate['tpot_ms']:.2f} "
                  f"| {serve['output_throughput']:.1f} | {generate['output_tokens_per_s']:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
