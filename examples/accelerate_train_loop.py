"""A plain PyTorch training loop written for Hugging Face Accelerate, run with `accelerate launch`.

Nothing here names neuron: `import torch` loads the device, accelerate detects it and, for more than one
process, picks `DistributedType.MULTI_NEURON` with the c10d backend "neuron"; each rank runs on
neuron:LOCAL_RANK.

    # one process (neuron:0 if the device is there, else CPU; --cpu forces CPU)
    python examples/accelerate_train_loop.py --steps 6

    # two ranks, from a config file with `distributed_type: MULTI_NEURON` and `num_processes: 2`
    accelerate launch --config_file multi_neuron.yaml examples/accelerate_train_loop.py --steps 6

    # or with flags only; --gpu_ids picks the NeuronCores (accelerate exports NEURON_RT_VISIBLE_CORES)
    accelerate launch --multi_gpu --num_processes 2 --gpu_ids 1,3 examples/accelerate_train_loop.py

    # checkpoint after 3 optimizer steps, then continue from it in a second launch
    accelerate launch ... examples/accelerate_train_loop.py --steps 6 --save_state_at 3 --state_dir ckpt
    accelerate launch ... examples/accelerate_train_loop.py --steps 6 --load_state ckpt

The model is a small MLP on a fixed synthetic regression set (optionally with input noise). `--per_device_batch_size` is per
process, so N processes with batch B see the same samples per optimizer step as one process with batch N*B
(the dataloader is sharded, not shuffled). The main process prints one line `SUMMARY {json}`: device,
distributed type, process count, every rank's device and visible cores, the global loss of every
micro-batch and optimizer step, the learning rates, and a checksum of the final weights.
"""
from __future__ import annotations

import argparse
import json
import os

import torch
from accelerate import Accelerator
from accelerate.utils import gather_object, set_seed
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

IN_FEATURES, HIDDEN, OUT_FEATURES, SAMPLES = 16, 64, 4, 256


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=6, help="optimizer steps in the whole run")
    p.add_argument("--per_device_batch_size", type=int, default=4)
    p.add_argument("--gradient_accumulation_steps", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--input_noise", type=float, default=0.0,
                   help="std of Gaussian noise added to the inputs on the device (> 0: the run depends on the device RNG)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--cpu", action="store_true", help="train on CPU even if neuron is available")
    p.add_argument("--save_state_at", type=int, default=None, help="save_state after this optimizer step")
    p.add_argument("--state_dir", default=None, help="folder for --save_state_at")
    p.add_argument("--load_state", default=None, help="load_state from this folder and continue from its step")
    args = p.parse_args(argv)
    if args.save_state_at is not None and not args.state_dir:
        p.error("--save_state_at needs --state_dir FOLDER to write the state to")
    return args


def synthetic_data(seed: int) -> TensorDataset:
    """A fixed regression set, identical on every rank and device (built on CPU from its own generator)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(SAMPLES, IN_FEATURES, generator=g)
    w = torch.randn(IN_FEATURES, OUT_FEATURES, generator=g)
    y = torch.tanh(x @ w) + 0.1 * torch.randn(SAMPLES, OUT_FEATURES, generator=g)
    return TensorDataset(x, y)


def build_model() -> nn.Module:
    return nn.Sequential(nn.Linear(IN_FEATURES, HIDDEN), nn.GELU(),
                         nn.Linear(HIDDEN, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, OUT_FEATURES))


def lr_schedule(total_steps: int, num_processes: int):
    """Linear decay over optimizer steps. accelerate's prepared scheduler advances `num_processes` times per
    optimizer step (it assumes schedules counted in per-process batches), so count in those units: the
    learning rate of optimizer step k is then the same for any number of processes."""
    def factor(scheduler_steps: int) -> float:
        return 1.0 - 0.5 * (scheduler_steps / num_processes) / total_steps
    return factor


def rank_info(accelerator: Accelerator, model: nn.Module) -> dict:
    info = {"process_index": accelerator.process_index,
            "local_rank": os.environ.get("LOCAL_RANK"),
            "device": str(accelerator.device),
            "param_device": str(next(model.parameters()).device),
            "visible_cores_env": os.environ.get("NEURON_RT_VISIBLE_CORES")}
    if accelerator.device.type == "neuron":
        # Which of the instance's cores this rank's device is (the runtime renumbers visible cores from 0).
        import torch_neuronx.runtime as neuron_runtime

        info["device_count"] = torch.neuron.device_count()
        index = accelerator.device.index
        index = torch.neuron.current_device() if index is None else index  # one process: plain "neuron"
        info["instance_core"] = neuron_runtime.topology().cores[index].global_index
    return info


def main(argv=None) -> dict:
    args = parse_args(argv)
    accelerator = Accelerator(gradient_accumulation_steps=args.gradient_accumulation_steps, cpu=args.cpu)
    set_seed(args.seed)  # same weights on every rank, and the same RNG streams as a one-process run

    model = build_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_schedule(args.steps, accelerator.num_processes))
    loader = DataLoader(synthetic_data(args.seed), batch_size=args.per_device_batch_size, shuffle=False,
                        drop_last=True)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)

    batches_per_step = args.gradient_accumulation_steps
    if len(loader) < args.steps * batches_per_step:
        raise SystemExit(f"--steps {args.steps} x --gradient_accumulation_steps {batches_per_step} needs "
                         f"{args.steps * batches_per_step} batches per process but the data has {len(loader)}: "
                         f"lower --steps or --per_device_batch_size.")

    start_step = 0
    batches = loader
    if args.load_state:
        accelerator.load_state(args.load_state)  # model, optimizer, scheduler, RNG states (neuron included)
        with open(os.path.join(args.load_state, "loop_step.json")) as f:
            start_step = json.load(f)["step"]
        batches = accelerator.skip_first_batches(loader, start_step * batches_per_step)

    loss_fn = nn.MSELoss()
    micro_losses, step_losses, lrs = [], [], []
    step, pending = start_step, []
    model.train()
    for x, y in batches:
        if step >= args.steps:
            break
        with accelerator.accumulate(model):
            if args.input_noise:  # drawn from the device generator, which save_state/load_state carry
                x = x + args.input_noise * torch.randn_like(x)
            loss = loss_fn(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
        # The mean over ranks of equal-sized local means is the loss of the global micro-batch.
        global_loss = accelerator.gather(loss.detach()[None]).mean().item()
        micro_losses.append(global_loss)
        pending.append(global_loss)
        if accelerator.sync_gradients:
            step += 1
            step_losses.append(sum(pending) / len(pending))
            lrs.append(scheduler.get_last_lr()[0])
            pending = []
            if args.save_state_at == step:
                accelerator.save_state(args.state_dir)
                if accelerator.is_main_process:
                    with open(os.path.join(args.state_dir, "loop_step.json"), "w") as f:
                        json.dump({"step": step}, f)
                accelerator.wait_for_everyone()

    unwrapped = accelerator.unwrap_model(model)
    checksum = sum(p.detach().double().abs().sum().item() for p in unwrapped.parameters())
    ranks = gather_object([rank_info(accelerator, model)])
    summary = {"device": str(accelerator.device), "distributed_type": str(accelerator.distributed_type),
               "num_processes": accelerator.num_processes, "ranks": ranks, "start_step": start_step,
               "final_step": step, "micro_losses": micro_losses, "step_losses": step_losses, "lrs": lrs,
               "weights_abs_sum": checksum}
    if accelerator.is_main_process:
        print("SUMMARY " + json.dumps(summary), flush=True)
    accelerator.end_training()
    return summary


if __name__ == "__main__":
    main()
