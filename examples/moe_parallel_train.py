"""Train a tiny mixture-of-experts model sharded over NeuronCores with transformers' own plans, and
compare its losses with one CPU process.

    python -m torch.distributed.run --nproc-per-node 2 examples/moe_parallel_train.py --arch gpt_oss --mode ep
    python -m torch.distributed.run --nproc-per-node 2 examples/moe_parallel_train.py --arch qwen3_moe --mode tp

`--mode ep`: `DistributedConfig(fsdp_size=N, ep_size=N)`: experts split over the ranks (the model's
`base_model_ep_plan`, tokens dispatched with all-to-all), dense weights FSDP2-sharded.
`--mode tp`: `tp_plan="auto"` (the model's `base_model_tp_plan`; GPT-OSS has none in transformers 5.23).
The model is built offline (random weights, saved, then loaded through `from_pretrained`).
"""
from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist


def train(model, device, steps):
    # foreach=False: transformers' TP leaves some parameters plain tensors and makes others DTensors on the
    # same device, and the foreach kernels refuse that mix (any device type)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, foreach=False)
    ids = torch.randint(0, model.config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(0))
    ids = ids.to(device)
    losses = []
    for _ in range(steps):
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--arch", default="gpt_oss", help="a transformers MoE model type (gpt_oss, qwen3_moe, mixtral)")
    p.add_argument("--mode", choices=["ep", "tp"], default="ep")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--path", default="/tmp/tiny-moe")
    args = p.parse_args()

    from transformers import AutoModelForCausalLM
    from transformers.distributed import DistributedConfig

    from torch_neuronx.integrations.tiny_models import build_tiny_model

    dist.init_process_group("neuron")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.neuron.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    path = os.path.join(args.path, args.arch)
    if rank == 0:
        build_tiny_model(path, args.arch)
    dist.barrier()
    reference = train(AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32), "cpu", args.steps)
    sharding = (dict(distributed_config=DistributedConfig(fsdp_size=world, ep_size=world)) if args.mode == "ep"
                else dict(tp_plan="auto"))
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, **sharding)
    losses = train(model, torch.device("neuron", torch.neuron.current_device()), args.steps)
    if rank == 0:
        print(f"{args.arch} {args.mode}{world}: neuron {losses}\n{'':>{len(args.arch)}} one CPU process {reference}")
        print("max |dloss|", max(abs(a - b) for a, b in zip(losses, reference)))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
