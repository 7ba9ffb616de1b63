"""Decoder layer (RMSNorm, SDPA attention, SwiGLU MLP, hidden 256): compiled neuron
vs eager neuron vs eager CPU vs Inductor on CPU, forward at decode (B1 T1) and
prefill (B4 T128) shapes, plus a training step (compiled neuron against Inductor on CPU,
the bound of what the virtual core can reach). Variants are interleaved call block by
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


_CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
_clock = time.perf_counter


def choose_clock(requested: str = "auto") -> tuple[str, str]:
    """The clock the ratios use, and why: on a host with more runnable processes than cores,
    wall time mostly measures waiting for a core, so process CPU time is used."""
    global _clock
    if requested == "auto":
        load, cores = os.getloadavg()[0], os.cpu_count() or 1
        requested, why = ("cpu", f"host load {load:.1f} > {cores} cores") if load > cores else (
            "wall", f"host load {load:.1f} <= {cores} cores")
    else:
        why = "asked for"
    _clock = _CLOCKS[requested]
    return requested, why


def _time(fn, reps):
    fn()
    start = _clock()
    for _ in range(reps):
        fn()
    return (_clock() - start) / reps


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


def paired_ratio(num, den, blocks: int, reps: int) -> dict:
    """time(num) / time(den) from many short adjacent blocks: `blocks` pairs of `reps` calls
    each, the order flipped every pair. On this shared VM one block's ratio swings by +-30%
    (neighbours take the core, the L3 is shared), while the gap measured is ~1-3%: the 9
    rounds of the four-variant table leave a +-5% error; the median of a few hundred adjacent
    pairs leaves ~+-1%. Returns the median ratio and its interquartile range."""
    ratios = []
    for i in range(blocks):
        first, second = (num, den) if i % 2 == 0 else (den, num)
        t_first, t_second = _time(first, reps), _time(second, reps)
        ratios.append(t_first / t_second if i % 2 == 0 else t_second / t_first)
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    return {"ratio": median, "q1": q1, "q3": q3, "blocks": blocks, "reps": reps}


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


# Targets: the compiled neuron program can at best run as fast as Inductor's own
# CPU program on the same host (bound 1.00x); these are the allowed excess.
DECODE_TARGET = 1.02
PREFILL_TARGET = 1.02
TRAIN_TARGET = 1.05


def setup(threads: int) -> Decoder:
    os.environ.setdefault("TORCH_NEURONX_NEFF_CACHE_DIR", tempfile.mkdtemp(prefix="neff_bench_"))
    torch.set_num_threads(threads)
    import torch_neuronx.compiler

    torch_neuronx.compiler.register()
    torch.manual_seed(0)
    return Decoder().eval()


def _interleaved(fns: dict, rounds: int, reps: int) -> dict:
    times = {k: [] for k in fns}
    for r in range(rounds):
        for k in (list(fns) if r % 2 == 0 else list(reversed(fns))):
            times[k].append(_time(fns[k], reps))
    return times


def forward_case(base: Decoder, shape, reps: int, rounds: int, pair_blocks: int = 0, pair_reps: int = 1) -> dict:
    """Per-round forward times (s) of the four variants at `shape`; with `pair_blocks`, also the
    compiled-neuron / Inductor-CPU ratio from paired_ratio()."""
    models = {"eager-neuron": copy.deepcopy(base).to("neuron"), "eager-cpu": copy.deepcopy(base)}
    models["compiled-neuron"] = torch.compile(copy.deepcopy(base).to("neuron"), backend="neuron")
    models["inductor-cpu"] = torch.compile(copy.deepcopy(base), backend="inductor")
    x_cpu = torch.randn(*shape)
    inputs = {k: x_cpu.to("neuron") if "neuron" in k else x_cpu for k in models}
    with torch.no_grad():
        for k in models:  # compile + check
            out = models[k](inputs[k])
            assert torch.allclose(out.cpu(), base(x_cpu), atol=1e-4), k
        calls = {k: (lambda k=k: models[k](inputs[k])) for k in models}
        times = _interleaved(calls, rounds, reps)
        paired = paired_ratio(calls["compiled-neuron"], calls["inductor-cpu"], pair_blocks, pair_reps) \
            if pair_blocks else None
        faults = None
        if shape[1] > 1:
            faults = {k: round(_minor_faults_per_call(lambda k=k: models[k](inputs[k]))) for k in models}
    return {"times": times, "faults": faults, "paired": paired}


def training_case(base: Decoder, rounds: int, reps: int = 3, pair_blocks: int = 0) -> dict:
    """Per-round training-step times (s) at B2 T64: forward, loss, backward (grads accumulate)."""
    train = {"eager-neuron": copy.deepcopy(base).train().to("neuron"), "eager-cpu": copy.deepcopy(base).train()}
    train["compiled-neuron"] = torch.compile(copy.deepcopy(base).train().to("neuron"), backend="neuron")
    train["inductor-cpu"] = torch.compile(copy.deepcopy(base).train(), backend="inductor")
    x_cpu = torch.randn(2, 64, 256)
    inputs = {k: x_cpu.to("neuron") if "neuron" in k else x_cpu for k in train}

    def step(k):
        train[k](inputs[k]).square().mean().backward()

    for k in train:
        step(k)
    calls = {k: (lambda k=k: step(k)) for k in train}
    paired = paired_ratio(calls["compiled-neuron"], calls["inductor-cpu"], pair_blocks, 1) if pair_blocks else None
    return {"times": _interleaved(calls, rounds, reps), "paired": paired}


# paired_ratio() sizes per row: (pairs of blocks, calls per block); quick runs take a quarter.
# Decode ~0.3 ms a call (400 x 2 x 20 calls: ~5 s), prefill ~12 ms, a training step ~10 ms.
PAIRS = {"decode": (400, 20), "prefill": (120, 1), "training": (120, 1)}


def rows(rounds: int = 9, threads: int = 1, clock: str = "auto", quick: bool = False) -> list[dict]:
    """The compiled rows of the host-bound table: {case, value (compiled neuron / Inductor CPU, median of adjacent
    block pairs), q1, q3 (its interquartile range), bound, target, ok, times (per-round seconds of
    each variant, the four-variant table), faults, clock}."""
    base = setup(threads)
    used, _ = choose_clock(clock)
    scale = 4 if quick else 1
    out = []

    def row(name, case, target, faults=None):
        p = case["paired"]
        out.append({"case": name, "value": p["ratio"], "q1": p["q1"], "q3": p["q3"], "unit": "x Inductor-CPU",
                    "bound": 1.0, "target": target, "ok": p["ratio"] <= target, "times": case["times"],
                    "faults": faults, "clock": used})

    for key, name, shape, reps, target in (
            ("decode", "decoder layer forward, decode (B1 T1), compiled", (1, 1, 256), 200, DECODE_TARGET),
            ("prefill", "decoder layer forward, prefill (B4 T128), compiled", (4, 128, 256), 10, PREFILL_TARGET)):
        blocks, block_reps = PAIRS[key]
        case = forward_case(base, shape, reps, rounds, blocks // scale, block_reps)
        row(name, case, target, case["faults"])
    case = training_case(base, rounds, pair_blocks=PAIRS["training"][0] // scale)
    row("training step (B2 T64), compiled", case, TRAIN_TARGET)
    return out


def _medians(times: dict, scale: float) -> dict:
    return {k: round(statistics.median(v) * scale, 1) for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clock", choices=("auto", "wall", "cpu"), default="auto",
                        help="auto: process CPU time when the host load exceeds its cores, else wall time")
    args = parser.parse_args()
    print("clock: %s (%s)" % choose_clock(args.clock))
    for row in rows(args.rounds, args.threads, args.clock):
        t = row["times"]
        training = row["case"].startswith("training")
        scale, unit = (1e3, "ms") if training or row["case"].find("prefill") >= 0 else (1e6, "us")
        print(f"{row['case']} ({unit}, median of {args.rounds} rounds): {_medians(t, scale)}")
        print(f"  compiled-neuron / inductor-cpu = {row['value']:.3f} (median of adjacent block pairs, "
              f"IQR {row['q1']:.3f}-{row['q3']:.3f}; bound {row['bound']:.2f}, target <= {row['target']})  "
              f"{_verdict(row['ok'])}")
        print(f"  same, median of the {args.rounds} four-variant rounds = "
              f"{_paired(t, 'compiled-neuron', 'inductor-cpu'):.3f}")
        print(f"  eager-neuron / compiled-neuron = {_paired(t, 'eager-neuron', 'compiled-neuron'):.2f}x")
        print(f"  eager-cpu / inductor-cpu       = {_paired(t, 'eager-cpu', 'inductor-cpu'):.2f}x "
              "(what Inductor itself gains on CPU)")
        print(f"  eager-neuron / eager-cpu       = {_paired(t, 'eager-neuron', 'eager-cpu'):.2f}x")
        if row["faults"] is not None:
            print(f"  minor page faults per call: {row['faults']} (eager frees and re-maps its large "
                  "intermediates; compiled code reuses buffers)")
    print(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    main()
