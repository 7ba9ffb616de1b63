"""A stack of bf16 Linears with 40 GB of parameters (far more than this host's memory), for the CLI
test: a dry run must stop at the allocation that exceeds one core's HBM, with little host memory."""
import json
import resource
import sys

import torch

out = sys.argv[1]
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
layers = []
try:
    for _ in range(300):   # 300 x 8192 x 8192 x 2 bytes = 40.3 GB
        layers.append(torch.nn.Linear(8192, 8192, bias=False, device="neuron", dtype=torch.bfloat16))
finally:
    with open(out, "w") as f:
        json.dump({"base_kib": base, "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                   "layers": len(layers)}, f)
