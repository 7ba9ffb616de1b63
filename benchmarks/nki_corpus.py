"""Simulator speed and cost-model estimates for the four canonical NKI kernels.

    python benchmarks/nki_corpus.py [--target trn2|trn3]

Prints, per kernel: wall time, simulated instructions per second, estimated device time,
the bottleneck engine and (for matmul) the estimate as a fraction of the bf16 peak.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

import nki  # noqa: E402
from nki.examples import attention, matmul, rmsnorm, tensor_add  # noqa: E402
from nki.targets import TARGETS  # noqa: E402

BF16 = ml_dtypes.bfloat16


def cases(rng):
    a, b = rng.standard_normal((2, 1024, 2048), dtype=np.float32)
    yield "tensor_add_tiled fp32 1024x2048", tensor_add.tensor_add_tiled, (a, b), {}
    lhsT = rng.standard_normal((1024, 2048)).astype(BF16)
    rhs = rng.standard_normal((1024, 1024)).astype(BF16)
    yield "matmul_optimized bf16 M2048 K1024 N1024", matmul.matmul_optimized, (lhsT, rhs), {}
    yield "matmul_tiled bf16 M2048 K1024 N1024", matmul.matmul_tiled, (lhsT, rhs), {}
    x = rng.standard_normal((1000, 2048)).astype(BF16)
    g = rng.standard_normal(2048).astype(BF16)
    yield "rmsnorm bf16 1000x2048 (ragged)", rmsnorm.rmsnorm, (x, g), {}
    q, k, v = (t.astype(BF16) for t in rng.standard_normal((3, 2048, 128), dtype=np.float32))
    yield "flash_attention causal bf16 S2048 d128", attention.flash_attention, (q, k, v), {}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--target", default="trn2")
    args = p.parse_args()
    rng = np.random.default_rng(0)
    peak = TARGETS[args.target].pe_peak_tflops_bf16
    print(f"target {args.target}; bf16 PE peak {peak:.1f} TFLOPS")
    print(f"{'kernel':42s} {'wall s':>7s} {'instr':>6s} {'instr/s':>8s} {'est us':>9s} "
          f"{'bottleneck':>10s} {'%peak':>6s}")
    for name, kern, a, kw in cases(rng):
        t = time.perf_counter()
        nki.simulate(kern, target=args.target)(*a, **kw)
        wall = time.perf_counter() - t
        r = nki.last_run()
        pk = f"{100 * r.tflops / peak:5.1f}" if r.flops else "    -"
        print(f"{name:42s} {wall:7.2f} {r.instructions:6d} {r.instructions / wall:8.0f} "
              f"{r.total_us:9.1f} {r.bottleneck():>10s} {pk:>6s}")


if __name__ == "__main__":
    main()
