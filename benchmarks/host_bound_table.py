"""The host-bound table in one run: every row with its bound (the host running the same kernels)
next to its target, PASS/MISS per row, and the clock used. Asserts nothing.

Eager rows come from benchmarks/eager_overhead.py, compiled rows from
benchmarks/compile_decoder.py (decode and prefill forward, and the training step, each
compiled neuron against Inductor on CPU in the same run). The bf16 rows come from
benchmarks/low_precision_gemm.py (a 2048^3 GEMM, an encoder block forward+backward, a compiled
decode step, each bf16 against the same workload in fp32); ONEDNN_MAX_CPU_ISA=AVX2 measures
them as a host without native bf16 GEMMs sees them.

    python benchmarks/host_bound_table.py --threads 1            # ~2 min on a quiet 2-core host
    python benchmarks/host_bound_table.py --threads 1 --quick    # shorter eager budget, 3 rounds
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import compile_decoder  # noqa: E402
import eager_overhead  # noqa: E402
import low_precision_gemm  # noqa: E402

EAGER_TINY_TARGET_US = 0.5   # tiny op extra over CPU (bound +0)
EAGER_BLOCK_TARGET = 1.05    # TransformerEncoderLayer fwd+bwd / CPU (bound 1.00x)


def eager_rows(threads: int, quick: bool, clock: str) -> list[dict]:
    """The seam to eager_overhead.py: its own eager_rows() where it has one; otherwise the
    same two rows built from its CASES and measure() with the table's targets."""
    own = getattr(eager_overhead, "eager_rows", None)
    if own is not None:
        return own(threads=threads, quick=quick, clock=clock)
    import torch

    torch.set_num_threads(threads)
    budget_s, batch_s = (0.8, 0.004) if quick else (6.0, 0.01)
    out = []
    for case in (eager_overhead.CASES[0], eager_overhead.CASES[-1]):
        m = eager_overhead.measure(case, budget_s, batch_s)
        if case.target == "extra":
            ok, text = m["extra"] <= EAGER_TINY_TARGET_US, f"bound +0, target extra <= {EAGER_TINY_TARGET_US} us"
        else:
            ok, text = m["ratio"] <= EAGER_BLOCK_TARGET, f"bound 1.00x, target <= {EAGER_BLOCK_TARGET}x"
        out.append({"case": case.name, "cpu_us": m["cpu"], "neuron_us": m["neuron"], "extra_us": m["extra"],
                    "ratio": m["ratio"], "target": text, "ok": ok, "clock": "wall"})
    return out


def _verdict(ok) -> str:
    return "PASS" if ok else "MISS (above the target on this host)"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=9, help="rounds of the compiled rows")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--clock", choices=("auto", "wall", "cpu"), default="auto")
    parser.add_argument("--no-bf16", action="store_true", help="leave out the bf16 rows (low_precision_gemm.py)")
    args = parser.parse_args(argv)
    rounds = 3 if args.quick else args.rounds
    lines = []
    for r in eager_rows(args.threads, args.quick, args.clock):
        now = (f"+{r['extra_us']:.2f} us over CPU" if "bound +0" in r["target"]
               else f"{r['ratio']:.3f}x CPU")
        lines.append((f"{r['case']} (eager)", now, r["target"], r["ok"], r["clock"]))
    for r in compile_decoder.rows(rounds, args.threads, args.clock, quick=args.quick):
        lines.append((r["case"], f"{r['value']:.3f}{r['unit']} (IQR {r['q1']:.2f}-{r['q3']:.2f})",
                      f"bound {r['bound']:.2f}x, target <= {r['target']}x", r["ok"], r["clock"]))
    print(f"\nhost-bound table, measured in one run ({args.threads} thread(s), load {os.getloadavg()[0]:.1f})")
    print(f"{'case':<52}{'now':<40}{'bound / target':<34}{'clock':<7}verdict")
    for case, now, target, ok, clock in lines:
        print(f"{case:<52}{now:<40}{target:<34}{clock:<7}{_verdict(ok)}")
    if not args.no_bf16:
        # bf16 next to its bound (the same workload in fp32), under the host GEMM policy in force
        print("\nbf16 rows: bound = the same workload in fp32 on neuron; target bf16/fp32 <= "
              f"{low_precision_gemm.TARGET}x where the host has no native bf16 GEMM")
        low_precision_gemm.print_rows(low_precision_gemm.rows(quick=args.quick))
    return 0


if __name__ == "__main__":
    sys.exit(main())
