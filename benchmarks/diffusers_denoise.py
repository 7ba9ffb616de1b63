"""Tiny Qwen-Image-2.1 denoising loop: neuron eager, neuron compiled, CPU eager and CPU with
Inductor in one run, then tensor parallelism on 2 ranks vs 1.

The pipeline is torch_neuronx.compat.diffusers.tiny_qwenimage21 (random weights, loaded with the real
from_pretrained), called with prompt embeddings computed on CPU, `output_type="latent"` (the loop only: no
VAE decode) and `use_kv_cache=False` (one block graph per shape). "compiled" is
`compile_repeated_blocks(backend=..., fullgraph=True, dynamic=False)` (`--compile blocks`, the announcement example's call) or
`torch.compile(transformer, fullgraph=False, dynamic=False)` (`--compile transformer`; fullgraph=True stops at
the rope table's `image_pad_mask.tolist()`), with backend "neuron"
on neuron and "inductor" on CPU. The four variants are interleaved (the order flips every round; the machine
may be shared); times are medians over rounds, ratios the median of per-round ratios.

TP: the same loop under torchrun with 1 and with 2 ranks, the transformer loaded with
`from_pretrained(..., parallel_config=TensorParallelConfig(mesh=DeviceMesh("neuron", ...)))`, each rank with
`--threads` threads. Targets: compiled neuron >= 1.5x eager neuron, and compiled neuron / Inductor on CPU <= 1.10.
Prints figures and PASS/MISS; never asserts, exits 0.
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
import warnings

import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def _sync(device) -> None:
    if torch.device(device).type == "neuron":
        torch.neuron.synchronize()


def denoise(pipe, args, device) -> tuple[float, torch.Tensor]:
    from torch_neuronx.compat.diffusers import tiny_qwenimage21 as tq

    embeds = tq.prompt_embeds().to(device)
    with torch.no_grad():
        t0 = time.perf_counter()
        out = pipe(prompt_embeds=embeds, height=args.size, width=args.size, num_inference_steps=args.steps,
                   generator=torch.Generator("cpu").manual_seed(0), output_type="latent",
                   use_kv_cache=False).images
        _sync(device)
        return time.perf_counter() - t0, out.float().cpu()


def compile_denoiser(pipe, backend: str, how: str) -> None:
    if how == "blocks":
        pipe.transformer.compile_repeated_blocks(backend=backend, fullgraph=True, dynamic=False)
    else:  # the rope table's image_pad_mask.tolist() breaks the graph: fullgraph=False here
        pipe.transformer.compile(backend=backend, fullgraph=False, dynamic=False)


def _paired(times: dict, num: str, den: str) -> float:
    return statistics.median(a / b for a, b in zip(times[num], times[den]))


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def single_process(args, path) -> dict:
    import torch_neuronx
    from torch_neuronx.compat.diffusers import tiny_qwenimage21 as tq

    variants = {"eager-neuron": ("neuron", None), "compiled-neuron": ("neuron", "neuron"),
                "eager-cpu": ("cpu", None), "inductor-cpu": ("cpu", "inductor")}
    pipes, devices, first = {}, {}, {}
    ref = None
    for name, (device, backend) in variants.items():
        pipe = tq.load(path).to(device)
        pipe.set_progress_bar_config(disable=True)
        if backend:
            compile_denoiser(pipe, backend, args.compile)
        torch_neuronx.reset_dynamo_metrics()
        first[name], out = denoise(pipe, args, device)  # compiles; checks the output
        if backend == "neuron":
            metrics = torch_neuronx.get_dynamo_metrics()
        ref = out if ref is None else ref
        diff = (out - ref).abs().max().item()
        print(f"  {name:16s} first call {first[name]:7.2f} s, max abs diff vs eager-neuron {diff:.2e}", flush=True)
        pipes[name], devices[name] = pipe, device
    names = list(variants)
    times = {k: [] for k in names}
    for r in range(args.rounds):
        for k in (names if r % 2 == 0 else names[::-1]):
            times[k].append(denoise(pipes[k], args, devices[k])[0])
    block_times = time_one_block(pipes, devices, args)
    after = torch_neuronx.get_dynamo_metrics()
    return {"times": times, "first": first, "neuron_metrics": metrics, "metrics_after": after,
            "block_times": block_times}


def _block_inputs(pipe, args, device):
    """The (args, kwargs) the first transformer block receives at the first denoising step."""
    seen = []

    def grab(module, a, k):
        if not seen:
            seen.append((a, k))

    handle = pipe.transformer.transformer_blocks[0].register_forward_pre_hook(grab, with_kwargs=True)
    try:
        denoise(pipe, args, device)
    finally:
        handle.remove()
    return seen[0]


def time_one_block(pipes, devices, args, reps: int = 10) -> dict:
    """One transformer block alone, per variant: where compilation applies, without the pipeline's and the
    transformer's eager code around it. Compiled variants get the inputs their eager twin's block received."""
    inputs = {"neuron": _block_inputs(pipes["eager-neuron"], args, "neuron"),
              "cpu": _block_inputs(pipes["eager-cpu"], args, "cpu")}
    names = list(pipes)
    times = {k: [] for k in names}

    def run(k):
        a, kw = inputs[devices[k]]
        block = pipes[k].transformer.transformer_blocks[0]
        with torch.no_grad():
            t0 = time.perf_counter()
            for _ in range(reps):
                block(*a, **kw)
            _sync(devices[k])
            return (time.perf_counter() - t0) / reps

    for k in names:
        run(k)
    for r in range(args.rounds):
        for k in (names if r % 2 == 0 else names[::-1]):
            times[k].append(run(k))
    return times


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tp_worker(args) -> None:
    """Under torchrun: time the loop with the transformer sharded across the ranks (eager and compiled)."""
    import torch.distributed as dist
    from diffusers import QwenImage21Transformer2DModel, TensorParallelConfig
    from torch.distributed.device_mesh import DeviceMesh

    from torch_neuronx.compat.diffusers import tiny_qwenimage21 as tq

    dist.init_process_group("neuron")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.neuron.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    device = torch.neuron.current_device()
    mesh = DeviceMesh("neuron", list(range(world)))
    result = {"world": world}
    for mode in ("eager", "compiled"):
        tr = QwenImage21Transformer2DModel.from_pretrained(args.path, subfolder="transformer",
                                                           parallel_config=TensorParallelConfig(mesh=mesh))
        pipe = tq.load(args.path, transformer=tr).to(device)
        pipe.set_progress_bar_config(disable=True)
        if mode == "compiled":
            compile_denoiser(pipe, "neuron", args.compile)
        denoise(pipe, args, device)
        samples = []
        for _ in range(args.rounds):
            dist.barrier()
            samples.append(denoise(pipe, args, device)[0])
        result[mode] = statistics.median(samples)
    if rank == 0:
        print("TPRESULT " + json.dumps(result), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def tp_launch(args, path, world: int) -> dict | None:
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
               PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={world}", "--rdzv-backend=c10d",
           f"--rdzv-endpoint=127.0.0.1:{_free_port()}", "--max-restarts=0", "--monitor-interval=0.5",
           os.path.abspath(__file__), "--tp-worker", "--path", path, "--size", str(args.size), "--steps",
           str(args.steps), "--rounds", str(args.rounds), "--threads", str(args.threads), "--compile", args.compile]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=REPO)
    for line in proc.stdout.splitlines():
        if line.startswith("TPRESULT "):
            return json.loads(line[len("TPRESULT "):])
    print(f"  TP launch with {world} rank(s) failed (rc {proc.returncode}):\n{proc.stderr[-2000:]}")
    return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=256, help="image side in pixels (latent tokens = (size/8)^2)")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads in every process")
    p.add_argument("--compile", choices=("blocks", "transformer"), default="blocks")
    p.add_argument("--no-tp", action="store_true")
    p.add_argument("--tp-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    from diffusers.utils import logging as diffusers_logging

    diffusers_logging.set_verbosity_error()  # the processor stand-in's type warning, once per load
    diffusers_logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    os.environ.setdefault("TORCH_NEURONX_NEFF_CACHE_DIR", tempfile.mkdtemp(prefix="neff_bench_"))
    if args.tp_worker:
        tp_worker(args)
        return
    from torch_neuronx.compat.diffusers import tiny_qwenimage21 as tq

    path = tq.build(tempfile.mkdtemp(prefix="bench_qwenimage21_"), num_layers=args.layers)
    print(f"tiny Qwen-Image-2.1 ({args.layers} blocks, 8 heads x 16), {args.size}x{args.size}, {args.steps} steps, "
          f"fp32, {args.threads} thread(s), compile={args.compile}, {args.rounds} rounds")
    res = single_process(args, path)
    times = res["times"]
    med = {k: round(statistics.median(v) * 1e3, 1) for k, v in times.items()}
    print(f"denoising loop (ms, median): {med}")
    speedup = _paired(times, "eager-neuron", "compiled-neuron")
    vs_inductor = _paired(times, "compiled-neuron", "inductor-cpu")
    m = res["neuron_metrics"]
    print(f"  neuron compile: graphs {m['graphs_compiled']}, recompiles {m['recompilations']}, "
          f"graph breaks {m['graph_breaks']}; timed calls compiled {res['metrics_after']['graphs_compiled']} more")
    print(f"  eager-neuron / compiled-neuron = {speedup:.2f}x (target >= 1.5)  {_verdict(speedup >= 1.5)}")
    print(f"  compiled-neuron / inductor-cpu = {vs_inductor:.3f} (target <= 1.10)  {_verdict(vs_inductor <= 1.10)}")
    print(f"  eager-neuron / eager-cpu       = {_paired(times, 'eager-neuron', 'eager-cpu'):.3f}")
    print(f"  eager-cpu / inductor-cpu       = {_paired(times, 'eager-cpu', 'inductor-cpu'):.2f}x "
          "(what Inductor itself gains on CPU)")
    print(f"  eager-neuron / inductor-cpu    = {_paired(times, 'eager-neuron', 'inductor-cpu'):.2f}x "
          "(compiled / eager neuron if the neuron program ran exactly as fast as Inductor's CPU program)")
    bt = res["block_times"]
    print(f"one transformer block alone (us, median): "
          f"{ {k: round(statistics.median(v) * 1e6, 1) for k, v in bt.items()} }")
    print(f"  eager-neuron / compiled-neuron = {_paired(bt, 'eager-neuron', 'compiled-neuron'):.2f}x; "
          f"compiled-neuron / inductor-cpu = {_paired(bt, 'compiled-neuron', 'inductor-cpu'):.3f}; "
          f"eager-cpu / inductor-cpu = {_paired(bt, 'eager-cpu', 'inductor-cpu'):.2f}x")
    if not args.no_tp:
        one, two = tp_launch(args, path, 1), tp_launch(args, path, 2)
        if one and two:
            print(f"TP (ms, median, rank 0): 1 rank eager {one['eager'] * 1e3:.1f} compiled "
                  f"{one['compiled'] * 1e3:.1f}; 2 ranks eager {two['eager'] * 1e3:.1f} compiled "
                  f"{two['compiled'] * 1e3:.1f}")
            print(f"  speedup 2 ranks vs 1: eager {one['eager'] / two['eager']:.2f}x, "
                  f"compiled {one['compiled'] / two['compiled']:.2f}x (reported, no target)")
    print(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    main()
