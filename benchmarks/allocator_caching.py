"""Claim: the caching allocator is no slower than the allocator before it, and
takes fewer page faults per step.

Each workload runs in two fresh processes of the same run: the caching
allocator (default) and the pre-cache allocator (TORCH_NEURONX_NO_MEMORY_CACHING=1:
every allocation its own host allocation, host-kernel outputs adopted from the
CPU allocator). Workloads:

* an eager transformer encoder block (d=256, 4 heads, B8 T64), forward + backward;
* allocation-heavy tiny ops: 200 x ((a + b) * c).relu() on (16,) tensors.

Printed per workload: ms per step for each allocator, the ratio caching/pre-cache
(target <= 1.0, i.e. no slower), and minor page faults per step (getrusage).
Processes alternate twice; figures are the better of the two per side.

    python benchmarks/allocator_caching.py            # ~1 min
    python benchmarks/allocator_caching.py --quick
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time, torch
steps = int(sys.argv[1])
results = {}
torch.manual_seed(0)
block = torch.nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True, dropout=0.0).to("neuron")
x = torch.randn(8, 64, 256, device="neuron")
def transformer():
    block(x).square().mean().backward()
a, b, c = (torch.randn(16, device="neuron") for _ in range(3))
def tiny():
    for _ in range(200):
        ((a + b) * c).relu()
for name, fn in (("transformer block fwd+bwd", transformer), ("200 tiny ops", tiny)):
    for _ in range(3):
        fn()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t = time.perf_counter()
    for _ in range(steps):
        fn()
    dt = (time.perf_counter() - t) / steps
    results[name] = {"ms": dt * 1e3, "faults": (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / steps}
print(json.dumps(results))
"""


def run(no_caching: bool, steps: int) -> dict:
    env = dict(os.environ)
    env.pop("TORCH_NEURONX_NO_MEMORY_CACHING", None)
    if no_caching:
        env["TORCH_NEURONX_NO_MEMORY_CACHING"] = "1"
    out = subprocess.run([sys.executable, "-c", CHILD, str(steps)], env=env, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    steps = 3 if args.quick else 20
    best: dict[str, dict] = {"caching": {}, "pre-cache": {}}
    for _ in range(1 if args.quick else 2):
        for label, flag in (("pre-cache", True), ("caching", False)):
            for name, r in run(flag, steps).items():
                old = best[label].get(name)
                best[label][name] = r if old is None or r["ms"] < old["ms"] else old
    print(f"{'workload':<28}{'pre-cache ms':>14}{'caching ms':>12}{'ratio':>8}{'faults/step pre':>17}"
          f"{'faults/step cache':>19}")
    for name in best["caching"]:
        old, new = best["pre-cache"][name], best["caching"][name]
        ratio = new["ms"] / old["ms"]
        verdict = "PASS" if ratio <= 1.0 else "MISS"
        print(f"{name:<28}{old['ms']:>14.3f}{new['ms']:>12.3f}{ratio:>8.2f}{old['faults']:>17.1f}"
              f"{new['faults']:>19.1f}  {verdict} (target ratio <= 1.0)")


if __name__ == "__main__":
    main()
