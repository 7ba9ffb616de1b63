"""Neuron memory per rank for TP x FSDP = 2 x 2 (4 ranks under torchrun) vs one process, on the SFT example's
tiny Qwen3 (examples/sft_tiny_assets.py), fp32, AdamW.

Each worker loads the model with transformers' `from_pretrained` (4 ranks: `distributed_config=
DistributedConfig(tp_size=2, fsdp_size=2)`, weights sharded as they load, c10d backend "neuron"; one process:
`.to("neuron")`), then runs one training step: forward with labels on a [1, 128] batch (each of the 2
data-parallel groups takes one row of the one-process [2, 128] batch), backward, AdamW step,
zero_grad(set_to_none=True). It reports, from `torch.neuron`:
* parameters + optimizer state: `memory_allocated()` after that step (what stays resident while training),
  and `max_memory_allocated()` over load + an optimizer step on zero gradients, before any forward
  (parameters, gradients, Adam moments: no activations);
* the peak over the whole run, activations included (the real training step).
Target: the per-rank peak for parameters + optimizer state is about a quarter of the one-process
peak; PASS when the largest rank's ratio is <= 0.30 (norm weights stay replicated on TP ranks). Prints the
figures; never asserts. `python benchmarks/sft_memory_per_rank.py` launches both runs itself.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TIMEOUT_S = 300


def worker(model_dir: str, out_dir: str) -> None:
    import torch
    import torch.distributed as dist
    from transformers import AutoModelForCausalLM

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    mem = torch.neuron
    mem.reset_peak_memory_stats()
    base = mem.memory_allocated()
    if world > 1:
        from transformers.distributed import DistributedConfig

        dist.init_process_group(backend="neuron")
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                                     distributed_config=DistributedConfig(tp_size=2, fsdp_size=2))
        dp_rank = model._device_mesh["fsdp"].get_local_rank()
        rows = slice(dp_rank, dp_rank + 1)
    else:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to("neuron")
        rows = slice(0, 2)
    model.train()
    params = mem.memory_allocated() - base
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    # parameters + optimizer state, no activations: one optimizer step on zero gradients
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    peak_params_optim = mem.max_memory_allocated() - base

    ids = torch.randint(0, model.config.vocab_size, (2, 128), generator=torch.Generator().manual_seed(0))
    ids = ids[rows].to("neuron")
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    result = {"rank": rank, "world": world, "params": params, "peak_params_optim": peak_params_optim,
              "resident_after_step": mem.memory_allocated() - base, "peak": mem.max_memory_allocated() - base,
              "loss": loss.detach().float().cpu().item()}
    with open(os.path.join(out_dir, f"mem_w{world}_r{rank}.json"), "w") as f:
        json.dump(result, f)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


def _run(cmd: list[str]) -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_DEACTIVATE_ASYNC_LOAD="1",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    if proc.returncode != 0:
        print(f"FAILED ({proc.returncode}): {' '.join(cmd[:6])} ...\n{out[-4000:]}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", nargs=2, metavar=("MODEL_DIR", "OUT_DIR"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(*args.worker)
        return

    sys.path.insert(0, os.path.join(REPO, "examples"))
    from sft_tiny_assets import build_model

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_model(os.path.join(tmp, "model"))
        me = os.path.abspath(__file__)
        _run([sys.executable, me, "--worker", model_dir, tmp])
        _run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4", me,
              "--worker", model_dir, tmp])
        results = {}
        for name in sorted(os.listdir(tmp)):
            if name.startswith("mem_"):
                with open(os.path.join(tmp, name)) as f:
                    r = json.load(f)
                results[(r["world"], r["rank"])] = r
    single = results.get((1, 0))
    ranks = [results[k] for k in sorted(results) if k[0] == 4]
    if single is None or len(ranks) != 4:
        print(f"MISS: runs did not all finish (got {sorted(results)})")
        return

    from torch_neuronx.runtime.units import size

    print("tiny Qwen3 (examples/sft_tiny_assets.py), fp32, AdamW; torch.neuron memory relative to process start")
    print(f"{'':<18}{'params':>13}{'params+optim peak':>20}{'resident after step':>22}{'peak (with step)':>19}")
    for label, r in [("1 process", single)] + [(f"2x2 rank {r['rank']}", r) for r in ranks]:
        print(f"{label:<18}{size(r['params']):>13}{size(r['peak_params_optim']):>20}"
              f"{size(r['resident_after_step']):>22}{size(r['peak']):>19}")
    worst = {k: max(r[k] for r in ranks) / single[k] for k in ("params", "peak_params_optim",
                                                               "resident_after_step", "peak")}
    print(f"\nlargest rank / 1 process: params {worst['params']:.3f}, params+optim peak "
          f"{worst['peak_params_optim']:.3f}, resident after step {worst['resident_after_step']:.3f}, "
          f"peak with activations {worst['peak']:.3f}")
    ratio = worst["peak_params_optim"]
    print(f"peak for parameters + optimizer state, TP2 x FSDP2 rank / 1 process = {ratio:.3f} "
          f"(target about 0.25, <= 0.30)  {'PASS' if ratio <= 0.30 else 'MISS'}")
    print(f"loss of the step: 1 process {single['loss']:.6f}, 2x2 {ranks[0]['loss']:.6f} "
          "(the 2x2 loss is one data-parallel group's row: not comparable)")


if __name__ == "__main__":
    main()
