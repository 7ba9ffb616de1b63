"""Claim: TORCH_NEURONX_NUMERICS=host costs nothing, check costs at most 2x on
the eager transformer block, and trainium's emulation cost is printed.

The modes are what numerics.install() installs at startup: the numerics
dispatch mode behind the C++ filter (numerics/cpp_filter.py), which hands only
ops with a watched dtype to Python. Here the same objects are enabled and
disabled around timed batches in one process, so host and each mode are
interleaved (order alternating every repeat) and compared as medians of
paired per-repeat ratios, with drift on a shared machine hitting both sides
alike. Host mode installs nothing, so "host" below is also the time with the
numerics layer absent; the script checks that no dispatch mode is pushed and
the filter is off in host mode. "check (py mode)" is the same mode pushed as
a plain Python dispatch mode (the design before the filter), for reference.

    python benchmarks/numerics_modes.py          # ~40 s
    python benchmarks/numerics_modes.py --quick  # ~8 s smoke run
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time

os.environ.setdefault("TORCH_NEURONX_NUMERICS", "host")
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from torch_neuronx import numerics  # noqa: E402
from torch_neuronx.numerics import cpp_filter  # noqa: E402
from torch_neuronx.numerics.config import NumericsConfig  # noqa: E402
from torch_neuronx.numerics.dispatch_mode import NumericsMode  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import eager_overhead  # noqa: E402  (the same transformer block the eager benchmark times)
from _interleave import interleaved  # noqa: E402

CHECK_RATIO = 2.0  # target: check / host on the transformer block


def build_block(dtype=torch.float32):
    return eager_overhead.build_block("neuron", dtype)


def build_add():
    a = torch.randn(16, device="neuron")
    b = torch.randn(16, device="neuron")
    return lambda: a + b


def build_positions():
    """An int64 path every HF decoder has: position ids, a mask, an embedding lookup."""
    emb = nn.Embedding(128, 32).to("neuron")
    ids = torch.arange(64, device="neuron").view(4, 16) % 128

    def step():
        pos = torch.arange(16, device="neuron").unsqueeze(0).expand(4, -1)
        mask = (ids > 3).long().cumsum(-1)
        return emb(ids + 0 * pos) * mask.unsqueeze(-1)
    return step


def time_batch(fn, n, mode=None):
    """us per call; `mode`: a context-manager factory, None for host."""
    with mode() if mode is not None else contextlib.nullcontext():
        start = time.perf_counter_ns()
        for _ in range(n):
            fn()
        return (time.perf_counter_ns() - start) / n / 1e3


def measure(fn, mode, budget_s, batch_s, min_repeats=7):
    for _ in range(3):
        fn()
        time_batch(fn, 1, mode)
    one = min(time_batch(fn, 1, mode) for _ in range(3))
    n = max(1, round(batch_s * 1e6 / max(one, 1e-3)))
    times = interleaved({"host": lambda: time_batch(fn, n), "mode": lambda: time_batch(fn, n, mode)},
                        budget_s, min_repeats)
    host, other = times["host"], times["mode"]
    return statistics.median(host), statistics.median(other), statistics.median(
        b / a for a, b in zip(host, other))


def to_python(fn, mode) -> str:
    """Ops of one call that the C++ filter handed to Python ("all" for the plain Python mode)."""
    with mode() as m:
        if not cpp_filter.active():
            return "all"
        before = cpp_filter.python_calls()
        fn()
        return str(cpp_filter.python_calls() - before)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch.set_num_threads (default 1: intra-op threads on a loaded machine spin)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    budget_s, batch_s = (0.6, 0.01) if args.quick else (4.0, 0.03)
    if numerics.mode() != "host" or torch._C._len_torch_dispatch_stack() != 0 or cpp_filter.active():
        print("run this script with TORCH_NEURONX_NUMERICS unset or host")
        return 0
    print(f"numerics modes vs host: torch {torch.__version__}, {torch.get_num_threads()} thread(s); "
          "host mode installs nothing (dispatch-mode stack empty, C++ filter off: True)")
    NumericsMode.skip_dynamo()  # as numerics.install() does

    def filtered(cfg):
        mode = NumericsMode(cfg)
        return lambda: cpp_filter.filtering(mode)

    check_mode = NumericsMode(NumericsConfig(mode="check"))
    modes = {
        "check": filtered(NumericsConfig(mode="check")),
        "check (py mode)": lambda: check_mode,
        "trainium": filtered(NumericsConfig(mode="trainium")),
        "trainium+SR": filtered(NumericsConfig(mode="trainium", stochastic_rounding=True)),
    }
    cases = [
        ("TransformerEncoderLayer fwd+bwd fp32", build_block, ("check", "check (py mode)", "trainium"), "check"),
        ("TransformerEncoderLayer fwd+bwd bf16", lambda: build_block(torch.bfloat16),
         ("check", "trainium+SR"), ""),
        ("int64 positions/mask/embedding", build_positions, ("check", "trainium"), ""),
        ("add (16,)", build_add, ("check",), ""),
    ]
    header = f"{'case':<40}{'mode':<17}{'host us':>10}{'mode us':>10}{'ratio':>8}{'to Python':>11}  target"
    print(header)
    print("-" * len(header))
    for name, build, mode_names, target in cases:
        fn = build()
        for m in mode_names:
            host_us, mode_us, ratio = measure(fn, modes[m], budget_s, batch_s)
            verdict = ""
            if target == m:
                verdict = f"<= {CHECK_RATIO}x {'PASS' if ratio <= CHECK_RATIO else 'FAIL'}"
            print(f"{name:<40}{m:<17}{host_us:>10.1f}{mode_us:>10.1f}{ratio:>7.2f}x{to_python(fn, modes[m]):>11}  {verdict}")
    numerics.reset_findings()
    return 0


if __name__ == "__main__":
    sys.exit(main())
