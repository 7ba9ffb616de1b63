"""Qwen-Image-2.1 with tensor parallelism across NeuronCores (diffusers' TensorParallelConfig), under torchrun.

    torchrun --nproc-per-node 8 examples/qwen_image_tp.py --model <Qwen-Image-2.1 folder> --compile  # as TorchNeuron's announcement runs it
    torchrun --nproc-per-node 2 examples/qwen_image_tp.py --tiny --compile --check                   # offline

Each rank drives one NeuronCore (`neuron:LOCAL_RANK`). The transformer is sharded by its `_tp_plan`:
* `--tp-path load` (default, the announcement's route): `from_pretrained(..., parallel_config=TensorParallelConfig(
  mesh=DeviceMesh("neuron", ...)))` reads only this rank's slice of each planned weight from the safetensors
  file; no weight collectives.
* `--tp-path memory`: the whole model is loaded on CPU on every rank, then `enable_parallelism(config=...)`
  shards it in place (diffusers' neuron path: each rank slices its own part, no collectives).
* `--tp-path scatter`: the whole model is moved to neuron, then torch's `parallelize_module` with diffusers'
  plan styles distributes every planned parameter from rank 0 (one `scatter` per parameter): the generic
  path diffusers takes on non-neuron meshes.
In every case the forward issues one sum all-reduce per rowwise layer (2 per block), eagerly or, with
`--compile`, as `_c10d_functional.all_reduce` inside each compiled block graph
(`compile_repeated_blocks(backend="neuron", fullgraph=True, dynamic=False)`).

Prompt embeddings come from the text encoder on CPU (`--tiny`: random embeddings of the right width, and a
text-only stand-in for Qwen3VLProcessor, which needs torchvision). Noise is drawn with
`torch.Generator("cpu")`. Rank 0 saves the image; `--check` makes rank 0 also run the pipeline without TP
on one NeuronCore and compare.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class CollectiveCounter:
    """Counts the collectives that reach the neuron process group, by kind: eager c10d calls, DTensor's
    functional collectives and the `_c10d_functional` ops inside compiled graphs all end up here."""

    KINDS = ("allreduce", "broadcast", "scatter", "allgather", "all_gather_single", "reduce_scatter",
             "reduce_scatter_single", "alltoall", "all_to_all_single", "gather", "reduce")

    def __init__(self):
        self.counts: dict[str, int] = {}

    def __enter__(self):
        from torch_neuronx.distributed.process_group import ProcessGroupNeuron

        self._saved = {}
        for kind in self.KINDS:
            original = getattr(ProcessGroupNeuron, kind)
            self._saved[kind] = original

            def counted(pg, *a, _kind=kind, _original=original, **k):
                self.counts[_kind] = self.counts.get(_kind, 0) + 1
                return _original(pg, *a, **k)

            setattr(ProcessGroupNeuron, kind, counted)
        return self

    def __exit__(self, *exc):
        from torch_neuronx.distributed.process_group import ProcessGroupNeuron

        for kind, original in self._saved.items():
            setattr(ProcessGroupNeuron, kind, original)


def _load_pipeline(args, model_dir, mesh, dtype):
    from diffusers import QwenImage21Transformer2DModel, TensorParallelConfig

    from torch_neuronx.compat.diffusers import tiny_qwenimage21 as tiny

    # no text encoder on the device (prompt embeddings come from the CPU) and a text-only processor
    extra = {"processor": tiny.TextOnlyProcessor(), "text_encoder": None} if args.tiny or args.config_only else {}
    if args.tp_path == "load":
        transformer = QwenImage21Transformer2DModel.from_pretrained(
            model_dir, subfolder="transformer", dtype=dtype, parallel_config=TensorParallelConfig(mesh=mesh))
    else:
        transformer = QwenImage21Transformer2DModel.from_pretrained(model_dir, subfolder="transformer", dtype=dtype)
        if args.tp_path == "memory":
            transformer.enable_parallelism(config=TensorParallelConfig(mesh=mesh))  # weights on CPU here
        else:  # scatter: diffusers' generic path, from rank 0's weights already on neuron
            from diffusers.hooks.tensor_parallel import _resolve_tp_plan, _styles, resolve_tp_shard_specs
            from torch.distributed.tensor.parallel import parallelize_module

            transformer.to(torch.neuron.current_device())
            resolve_tp_shard_specs(transformer, transformer._tp_plan, mesh.size())  # uneven splits raise here
            for block, plan in _resolve_tp_plan(transformer, transformer._tp_plan):
                parallelize_module(block, mesh, _styles(plan))
    from diffusers import QwenImage21Pipeline

    pipe = QwenImage21Pipeline.from_pretrained(model_dir, transformer=transformer, dtype=dtype, **extra)
    return pipe.to(torch.neuron.current_device())


def _generate(pipe, embeds, args):
    device = torch.neuron.current_device()
    return pipe(prompt_embeds=embeds.to(device), prompt_embeds_mask=None, height=args.size, width=args.size,
                num_inference_steps=args.steps, generator=torch.Generator("cpu").manual_seed(args.seed),
                output_type="pt", use_kv_cache=not args.no_kv_cache).images


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="pipeline folder (Qwen-Image-2.1 layout)")
    p.add_argument("--tiny", action="store_true", help="build a tiny local pipeline first (offline)")
    p.add_argument("--tiny-dir", default=os.path.join(tempfile.gettempdir(), "torch_neuronx_tiny_qwenimage21"))
    p.add_argument("--config-only", action="store_true",
                   help="--model is a folder of configs and weightless checkpoints (examples/qwen_image_config_only.py, "
                        "for a dry run: python -m torch_neuronx.plan run); no text encoder or processor is loaded")
    p.add_argument("--tp-path", choices=("load", "memory", "scatter"), default="load")
    p.add_argument("--compile", action="store_true", help="compile_repeated_blocks(backend='neuron', ...)")
    p.add_argument("--no-kv-cache", action="store_true", help="use_kv_cache=False: one block graph per shape")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="qwen_image_tp.png")
    p.add_argument("--check", action="store_true", help="rank 0 compares with a single-device run")
    p.add_argument("--atol", type=float, default=1e-4)
    p.add_argument("--json", help="rank 0 writes figures (diff, collectives, compile metrics) here")
    args = p.parse_args(argv)
    if not (args.model or args.tiny):
        p.error("pass --model <folder> or --tiny")
    warnings.filterwarnings("ignore", message=".*experimental.*")
    warnings.filterwarnings("ignore", message=".*Expected types for processor.*")

    dist.init_process_group(backend="neuron")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.neuron.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dtype = getattr(torch, args.dtype)

    from torch_neuronx.compat.diffusers import tiny_qwenimage21 as tiny

    model_dir = args.model
    if args.tiny:
        model_dir = args.tiny_dir
        if rank == 0:
            tiny.build(model_dir)
        dist.barrier()
    transformer_config = json.load(open(os.path.join(model_dir, "transformer", "config.json")))
    # stands in for the CPU text encoder's output, as wide as the transformer's context input
    embeds = tiny.prompt_embeds(dim=transformer_config["context_in_dim"]).to(dtype)

    heads = transformer_config["num_attention_heads"]
    if heads % world:
        raise SystemExit(f"TP degree {world} does not divide the transformer's {heads} attention heads: run with "
                         f"--nproc-per-node in {[d for d in range(1, heads + 1) if heads % d == 0]}")
    mesh = DeviceMesh("neuron", list(range(world)))
    counter = CollectiveCounter()
    t0 = time.perf_counter()
    with counter:
        pipe = _load_pipeline(args, model_dir, mesh, dtype)
    load_collectives, counter.counts = counter.counts, {}
    load_s = time.perf_counter() - t0
    if args.compile:
        pipe.transformer.compile_repeated_blocks(backend="neuron", fullgraph=True, dynamic=False)
    import torch_neuronx

    torch_neuronx.reset_dynamo_metrics()
    times = []
    for _ in range(2):  # second call: compiled graphs reused
        t0 = time.perf_counter()
        with torch.no_grad(), counter:
            image = _generate(pipe, embeds, args)
        times.append(time.perf_counter() - t0)
        if _ == 0:
            first_collectives, counter.counts = counter.counts, {}
    metrics = torch_neuronx.get_dynamo_metrics()
    image = image.float().cpu()
    dtensors = sum(type(q).__name__ == "DTensor" for q in pipe.transformer.parameters())

    result = {"world_size": world, "tp_path": args.tp_path, "compile": args.compile, "load_s": round(load_s, 3),
              "call_s": [round(t, 3) for t in times], "load_collectives": load_collectives,
              "forward_collectives": first_collectives, "dtensor_params": dtensors,
              "graphs_compiled": metrics["graphs_compiled"], "recompilations": metrics["recompilations"],
              "image_shape": list(image.shape)}
    if rank == 0:
        from PIL import Image

        arr = (image[0, :3].permute(1, 2, 0).clamp(0, 1) * 255).round().to(torch.uint8).numpy()
        Image.fromarray(arr).save(args.out)
        result["saved"] = os.path.abspath(args.out)
        if args.check:
            ref_pipe = tiny.load(model_dir, dtype=dtype) if args.tiny else \
                __import__("diffusers").QwenImage21Pipeline.from_pretrained(model_dir, dtype=dtype)
            ref_pipe.to(torch.neuron.current_device())
            with torch.no_grad():
                ref = _generate(ref_pipe, embeds, args).float().cpu()
            result["max_abs_diff"] = (ref - image).abs().max().item()
            result["match"] = result["max_abs_diff"] <= args.atol
        print(json.dumps(result), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()
    return 0 if rank != 0 or not args.check or result["match"] else 1


if __name__ == "__main__":
    sys.exit(main())
