"""Decoder layer (RMSNorm, SDPA attention, SwiGLU MLP, hidden 256): compiled neuron
vs eager neuron vs eager CPU vs Inductor on CPU, forward at decode (B1 T1) and
prefill (B4 T128) shapes, plus a training step. Variants are interleaved call block by
call block (the order flips every round, so load from other processes hits all alike);
each ratio is the median over rounds of the per-round ratio (the machine may be
shared); prints ratios and PASS/MISS, asserts nothing.
"""
from __future__ import annotations

import argparse
import copy
import os
import resource
import statistics
import tempfile
import time

import torch
import torch.nn.functional as F


class RMSNorm(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class Decoder(torch.nn.Module):
    def __init__(self, hidden=256, heads=4, ff=1024):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = RMSNorm(hidden), RMSNorm(hidden)
        self.qkv = torch.nn.Linear(hidden, 3 * hidden, bias=False)
        self.o = torch.nn.Linear(hidden, hidden, bias=False)
        self.gate = torch.nn.Linear(hidden, ff, bias=False)
        self.up = torch.nn.Linear(hidden, ff, bias=False)
        self.down = torch.nn.Linear(ff, hidden, bias=False)

    def forward(self, x):
        b, t, h = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, h))
        y = self.n2(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


def _time(fn, reps):
    fn()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - start) / reps


def _minor_faults_per_call(fn, reps: int = 3) -> float:
    """Minor page faults per call: fresh large buffers that glibc maps anew cost one fault per 4 KiB page."""
    fn()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(reps):
        fn()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / reps


def _paired(times: dict, num: str, den: str) -> float:
    """Median over rounds of time[num] / time[den] measured in the same round."""
    return statistics.median(a / b for a, b in zip(times[num], times[den]))


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    os.environ.setdefault("TORCH_NEURONX_NEFF_CACHE_DIR", tempfile.mkdtemp(prefix="neff_bench_"))
    torch.set_num_threads(args.threads)
    import torch_neuronx.compiler

    # Needs the C++ fix in the compiler report: SDPA's PrivateUse1 choice stub fails under fake tensors.
    torch_neuronx.compiler.register()
    torch.manual_seed(0)
    base = Decoder().eval()
    models = {"eager-neuron": copy.deepcopy(base).to("neuron"), "eager-cpu": copy.deepcopy(base)}
    models["compiled-neuron"] = torch.compile(copy.deepcopy(base).to("neuron"), backend="neuron")
    models["inductor-cpu"] = torch.compile(copy.deepcopy(base), backend="inductor")
    for shape, reps in (((1, 1, 256), 200), ((4, 128, 256), 10)):
        x_cpu = torch.randn(*shape)
        inputs = {k: x_cpu.to("neuron") if "neuron" in k else x_cpu for k in models}
        times = {k: [] for k in models}
        with torch.no_grad():
            for k in models:  # compile + check
                out = models[k](inputs[k])
                assert torch.allclose(out.cpu(), base(x_cpu), atol=1e-4), k
            for r in range(args.rounds):
                for k in (list(models) if r % 2 == 0 else list(reversed(models))):
                    times[k].append(_time(lambda: models[k](inputs[k]), reps))
        us = {k: round(statistics.median(v) * 1e6, 1) for k, v in times.items()}
        speedup = _paired(times, "eager-neuron", "compiled-neuron")
        vs_inductor = _paired(times, "compiled-neuron", "inductor-cpu")
        prefill = shape[1] > 1
        print(f"forward B{shape[0]} T{shape[1]} (us, median of {args.rounds} rounds): {us}")
        if prefill:
            print(f"  eager-neuron / compiled-neuron = {speedup:.2f}x (target >= 1.2)  {_verdict(speedup >= 1.2)}")
        else:
            print(f"  eager-neuron / compiled-neuron = {speedup:.2f}x")
        print(f"  compiled-neuron / inductor-cpu = {vs_inductor:.3f} (target <= 1.05)  {_verdict(vs_inductor <= 1.05)}")
        print(f"  eager-cpu / inductor-cpu       = {_paired(times, 'eager-cpu', 'inductor-cpu'):.2f}x "
              "(what Inductor itself gains on CPU)")
        print(f"  eager-neuron / inductor-cpu    = {_paired(times, 'eager-neuron', 'inductor-cpu'):.2f}x "
              "(compiled / eager neuron if the neuron program ran exactly as fast as Inductor's CPU program)")
        if prefill:
            with torch.no_grad():
                faults = {k: round(_minor_faults_per_call(lambda: models[k](inputs[k]))) for k in models}
            print(f"  minor page faults per call: {faults} (eager frees and re-maps its large intermediates; "
                  "compiled code reuses buffers)")
    # training step at B2 T64
    x_cpu = torch.randn(2, 64, 256)
    train = {"eager-neuron": copy.deepcopy(base).train().to("neuron")}
    train["compiled-neuron"] = torch.compile(copy.deepcopy(base).train().to("neuron"), backend="neuron")
    x_n = x_cpu.to("neuron")

    def step(m):
        m(x_n).square().mean().backward()

    times = {k: [] for k in train}
    for k in train:
        step(train[k])
    for r in range(args.rounds):
        for k in (list(train) if r % 2 == 0 else list(reversed(train))):
            times[k].append(_time(lambda: step(train[k]), 3))
    print(f"training step B2 T64 (ms, median): { {k: round(statistics.median(v) * 1e3, 2) for k, v in times.items()} }")
    print(f"  eager-neuron / compiled-neuron = {_paired(times, 'eager-neuron', 'compiled-neuron'):.2f}x")
    print(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    main()
