"""`vllm bench serve` output tokens/s of one tiny Llama (hidden 128, 2 layers, head_dim 32) served by
`vllm serve` on neuron (the platform plugin) and on vLLM's own CPU platform (`VLLM_PLUGINS=none`), same host,
same run, printed as a ratio. Target: neuron >= 0.95x the CPU platform. Prints PASS/MISS; never asserts.

Run in the vLLM environment (docs/serving.md):

    .venv-vllm/bin/python benchmarks/vllm_serve_throughput.py [--num-prompts 64 --max-concurrency 8 --rounds 2]

Each round serves both platforms one after the other (the order flips every round, the machine may be
shared); the ratio is the median over rounds of each round's ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLI = [sys.executable, "-m", "torch_neuronx.integrations.vllm"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_and_bench(model: str, plugins: str | None, args, workdir: str) -> dict:
    env = dict(os.environ, PYTHONPATH=REPO)
    if plugins is not None:
        env["VLLM_PLUGINS"] = plugins
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = open(os.path.join(workdir, f"serve-{plugins or 'neuron'}.log"), "w")
    server = subprocess.Popen(
        [*CLI, "serve", model, "--host", "127.0.0.1", "--port", str(port), "--dtype", "bfloat16",
         "--max-model-len", "512", "--max-num-seqs", str(args.max_concurrency),
         "--kv-cache-memory-bytes", str(1 << 30)],
        stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 600
        while True:
            if server.poll() is not None:
                log.flush()
                raise RuntimeError("vllm serve exited:\n" + open(log.name).read()[-3000:])
            if time.monotonic() > deadline:
                raise RuntimeError(f"vllm serve did not answer in 600 s; see {log.name}")
            try:
                if urllib.request.urlopen(base + "/health", timeout=5).status == 200:
                    break
            except OSError:
                time.sleep(2)
        name = f"bench-{plugins or 'neuron'}.json"
        subprocess.run(
            [*CLI, "bench", "serve", "--backend", "vllm", "--model", model, "--base-url", base,
             "--dataset-name", "random", "--random-input-len", str(args.input_len), "--random-output-len",
             str(args.output_len), "--num-prompts", str(args.num_prompts), "--max-concurrency",
             str(args.max_concurrency), "--seed", "0", "--save-result", "--result-dir", workdir,
             "--result-filename", name],
            env=env, check=True, capture_output=True, text=True, timeout=900)
        return json.load(open(os.path.join(workdir, name)))
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-prompts", type=int, default=64)
    parser.add_argument("--max-concurrency", type=int, default=8)
    parser.add_argument("--input-len", type=int, default=64)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    from torch_neuronx.integrations.tiny_models import build_tiny_model

    with tempfile.TemporaryDirectory() as workdir:
        model = build_tiny_model(os.path.join(workdir, "llama"), "llama", dtype=torch.bfloat16, hidden_size=128,
                                 intermediate_size=256, head_dim=32)
        ratios, results = [], {"neuron": [], "cpu": []}
        for round_ in range(args.rounds):
            order = [("cpu", "none"), ("neuron", None)]
            if round_ % 2:
                order.reverse()
            got = {label: serve_and_bench(model, plugins, args, workdir) for label, plugins in order}
            for label in results:
                results[label].append(got[label])
            ratios.append(got["neuron"]["output_throughput"] / got["cpu"]["output_throughput"])
            print(f"round {round_}: neuron {got['neuron']['output_throughput']:.1f} output tok/s, "
                  f"CPU platform {got['cpu']['output_throughput']:.1f}, ratio {ratios[-1]:.3f}", flush=True)

    def median(label, field):
        return statistics.median(r[field] for r in results[label])

    print(f"\n{args.num_prompts} requests, concurrency {args.max_concurrency}, {args.input_len} in / "
          f"{args.output_len} out tokens, {args.rounds} rounds (medians)")
    print("| platform | output tok/s | mean TTFT ms | mean TPOT ms |\n|---|---|---|---|")
    for label in ("neuron", "cpu"):
        print(f"| {label} | {median(label, 'output_throughput'):.1f} | {median(label, 'mean_ttft_ms'):.1f} | "
              f"{median(label, 'mean_tpot_ms'):.2f} |")
    ratio = statistics.median(ratios)
    print(f"\nneuron / CPU platform output tokens/s: {ratio:.3f}x (target >= 0.95x): {'PASS' if ratio >= 0.95 else 'MISS'}")


if __name__ == "__main__":
    main()
