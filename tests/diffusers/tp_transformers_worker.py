"""torchrun worker: Qwen-Image, FLUX and FLUX.2 tiny transformers sharded with diffusers' TensorParallelConfig.

For each model (the compatibility suite's tiny configs, random weights): rank 0 saves the transformer with
`save_pretrained`; every rank loads it twice through the real `from_pretrained`: once whole on its own
NeuronCore (the single-device reference) and once with `parallel_config=TensorParallelConfig(mesh=
DeviceMesh("neuron", ...))` (each rank reads its slice from the safetensors file). Both run the same
deterministic inputs eagerly; with `--compile-model NAME` that model's TP copy also runs with
`compile_repeated_blocks(backend="neuron", fullgraph=True, dynamic=False)`. Each rank writes
`<workdir>/rank<N>.json`, one record per model: max abs difference to the reference, the collectives that reached the neuron process group while
loading and during the forward, and how many parameters are DTensors.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import warnings

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

TOKENS, SIDE = 7, 4             # text tokens; latent side in patches (SIDE * SIDE image tokens)


def _randn(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator("cpu").manual_seed(seed))


def _ids(channels: int, text: bool) -> torch.Tensor:
    """Position ids as the pipelines build them: zeros for text, (0, row, col[, 0]) grid for the image."""
    if text:
        return torch.zeros(TOKENS, channels)
    rows, cols = torch.meshgrid(torch.arange(SIDE), torch.arange(SIDE), indexing="ij")
    ids = torch.zeros(SIDE * SIDE, channels)
    ids[:, 1], ids[:, 2] = rows.flatten().float(), cols.flatten().float()
    return ids


def _inputs(name: str) -> dict:
    img = SIDE * SIDE
    if name == "qwenimage":   # in_channels 16, joint_attention_dim 16; img_shapes in latent patches
        return dict(hidden_states=_randn(1, img, 16, seed=1), encoder_hidden_states=_randn(1, TOKENS, 16, seed=2),
                    encoder_hidden_states_mask=torch.ones(1, TOKENS, dtype=torch.long),
                    timestep=torch.tensor([0.5]), img_shapes=[[(1, SIDE, SIDE)]])
    if name == "flux":        # in_channels 16, joint_attention_dim 32, pooled 32
        return dict(hidden_states=_randn(1, img, 16, seed=1), encoder_hidden_states=_randn(1, TOKENS, 32, seed=2),
                    pooled_projections=_randn(1, 32, seed=3), timestep=torch.tensor([0.5]),
                    img_ids=_ids(3, False), txt_ids=_ids(3, True))
    if name == "flux2":       # in_channels 16, joint_attention_dim 32, guidance embedding on by default
        return dict(hidden_states=_randn(1, img, 16, seed=1), encoder_hidden_states=_randn(1, TOKENS, 32, seed=2),
                    timestep=torch.tensor([0.5]), guidance=torch.tensor([4.0]),
                    img_ids=_ids(4, False), txt_ids=_ids(4, True))
    raise ValueError(name)


def _move(inputs: dict, device) -> dict:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def run_model(name: str, workdir: str, mesh: DeviceMesh, compile_: bool) -> dict:
    from diffusers import TensorParallelConfig

    from examples.qwen_image_tp import CollectiveCounter
    from torch_neuronx.compat.diffusers.specs import BY_NAME

    rank, device = dist.get_rank(), torch.neuron.current_device()
    path = os.path.join(workdir, name)
    if rank == 0:
        transformer = BY_NAME[name].build()["transformer"]
        transformer.save_pretrained(path, safe_serialization=True)
        del transformer
    dist.barrier()
    with open(os.path.join(path, "config.json")) as f:
        cls_name = json.load(f)["_class_name"]
    cls = getattr(__import__("diffusers"), cls_name)

    inputs = _inputs(name)
    single = cls.from_pretrained(path).to(device)
    with torch.no_grad():
        ref = single(**_move(inputs, device), return_dict=False)[0].cpu()
    del single

    counter = CollectiveCounter()
    with counter:
        tp = cls.from_pretrained(path, parallel_config=TensorParallelConfig(mesh=mesh))
    load_collectives, counter.counts = counter.counts, {}
    with torch.no_grad(), counter:
        out = tp(**_move(inputs, device), return_dict=False)[0]
    forward_collectives, counter.counts = counter.counts, {}
    result = {"rank": rank, "model": name, "class": cls_name, "out_device": str(out.device),
              "out_type": type(out).__name__, "max_abs_diff": (out.cpu() - ref).abs().max().item(),
              "ref_abs_max": ref.abs().max().item(), "load_collectives": load_collectives,
              "forward_collectives": forward_collectives,
              "dtensor_params": sum(type(p).__name__ == "DTensor" for p in tp.parameters()),
              "params": sum(1 for _ in tp.parameters())}
    if compile_:
        import torch_neuronx

        torch._dynamo.reset()
        torch_neuronx.reset_dynamo_metrics()
        tp.compile_repeated_blocks(backend="neuron", fullgraph=True, dynamic=False)
        with torch.no_grad(), counter:
            compiled = tp(**_move(inputs, device), return_dict=False)[0]
        metrics = torch_neuronx.get_dynamo_metrics()
        result.update(compiled_max_diff=(compiled.cpu() - ref).abs().max().item(),
                      compiled_collectives=counter.counts, graphs_compiled=metrics["graphs_compiled"],
                      graph_breaks=metrics["graph_breaks"])
        counter.counts = {}
    return result


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--workdir", required=True)
    p.add_argument("--models", default="qwenimage,flux,flux2")
    p.add_argument("--compile-model", default="")
    args = p.parse_args()
    warnings.filterwarnings("ignore")
    dist.init_process_group(backend="neuron")
    torch.neuron.set_device(int(os.environ.get("LOCAL_RANK", dist.get_rank())))
    mesh = DeviceMesh("neuron", list(range(dist.get_world_size())))
    results = [run_model(name, args.workdir, mesh, name == args.compile_model) for name in args.models.split(",")]
    with open(os.path.join(args.workdir, f"rank{dist.get_rank()}.json"), "w") as f:  # stdout lines interleave
        json.dump(results, f)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
