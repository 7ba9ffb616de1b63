"""Worker launched by torchrun in test_launch.py (env:// rendezvous)."""
import os
import sys

import torch

local_rank = int(os.environ["LOCAL_RANK"])
# Before anything sets it: the current device is neuron:LOCAL_RANK (accelerate
# reads it while parsing arguments) and every core of the instance is visible.
start_device = torch.neuron.current_device()
count = torch.neuron.device_count()
accel = torch.accelerator.current_device_index()
torch.accelerator.set_device_index(local_rank)  # what transformers does later

import torch.distributed as dist  # noqa: E402

dist.init_process_group(backend="neuron")  # env:// from torchrun, as accelerate calls it
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.full((4,), float(rank + 1), device="neuron")
dist.all_reduce(t)
assert t.device == torch.device("neuron", local_rank)
assert t.cpu().tolist() == [world * (world + 1) / 2] * 4
info = [None] * world
dist.all_gather_object(info, (rank, local_rank, os.environ.get("GROUP_RANK"), start_device, accel, count))
dist.barrier(device_ids=[local_rank])
if rank == 0:
    print("INFO", info)
dist.destroy_process_group()
sys.exit(0)
