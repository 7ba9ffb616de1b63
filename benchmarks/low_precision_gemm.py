"""bf16 on neuron against the same workload in fp32 (the host's bound for a bf16 GEMM: its fp32
GEMM on converted inputs), under TORCH_NEURONX_HOST_LOW_PRECISION_GEMM as set (default auto).

Rows: a 2048^3 GEMM (eager), a transformer block forward + backward (eager), a compiled decode
step (B1 T1, hidden 1024). Each prints bf16 time, fp32 time and bf16 / fp32 against the target
(1.3x where the host has no native bf16 GEMM). With --mode all it also runs the `native` policy
(the CPU's own bf16 kernel, today's speed) in the same process for comparison.
`--diff` prints how many elements of bf16/fp16 GEMMs differ between the CPU's kernel and fp32
accumulation rounded once (docs/numerics.md).

    python benchmarks/low_precision_gemm.py                          # this host as it is
    ONEDNN_MAX_CPU_ISA=AVX2 python benchmarks/low_precision_gemm.py  # a host without native bf16
    python benchmarks/low_precision_gemm.py --diff
"""
from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compile_decoder import Decoder  # noqa: E402

TARGET = 1.3   # bf16 / fp32 on a host without native bf16 GEMMs


def _clock():
    """Process CPU time with one thread (other processes on a shared host do not count),
    wall time otherwise."""
    return time.process_time() if torch.get_num_threads() == 1 else time.perf_counter()


def _paired_times(fns: dict, reps: int, rounds: int) -> dict:
    """Median seconds per call of each function, the variants interleaved round by round."""
    for fn in fns.values():
        fn()
    times = {k: [] for k in fns}
    for r in range(rounds):
        for k in (list(fns) if r % 2 == 0 else list(reversed(fns))):
            start = _clock()
            for _ in range(reps):
                fns[k]()
            times[k].append((_clock() - start) / reps)
    return {k: statistics.median(v) for k, v in times.items()}


def gemm_case(dtype, n: int = 2048):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=g).to(dtype).to("neuron")
    b = torch.randn(n, n, generator=g).to(dtype).to("neuron")
    return lambda: torch.mm(a, b)


def block_case(dtype, width: int = 512, tokens: int = 256):
    torch.manual_seed(0)
    block = torch.nn.TransformerEncoderLayer(width, 8, 4 * width, batch_first=True, dropout=0.0)
    block = block.to("neuron", dtype)
    x = torch.randn(2, tokens // 2, width).to("neuron", dtype)

    def step():
        block.zero_grad(set_to_none=True)
        block(x).float().sum().backward()
    return step


def decode_case(dtype, hidden: int = 1024):
    torch.manual_seed(0)
    model = Decoder(hidden=hidden, heads=8, ff=4 * hidden).eval().to("neuron", dtype)
    compiled = torch.compile(copy.deepcopy(model), backend="neuron")
    x = torch.randn(1, 1, hidden).to("neuron", dtype)

    def step():
        with torch.no_grad():
            compiled(x)
    return step


CASES = [("GEMM 2048^3 (eager)", gemm_case, 1, 3),
         ("TransformerEncoderLayer w512 fwd+bwd, 256 tokens (eager)", block_case, 1, 5),
         ("decode step hidden 1024, B1 T1 (compiled)", decode_case, 20, 7)]


def rows(modes=("current",), quick: bool = False) -> list[dict]:
    """One row per case and policy mode: bf16 and fp32 seconds per call and their ratio."""
    from torch_neuronx.runtime import host_gemm

    os.environ.setdefault("TORCH_NEURONX_NEFF_CACHE_DIR", tempfile.mkdtemp(prefix="neff_bench_"))
    out = []
    for mode in modes:
        previous = host_gemm.set_mode(mode) if mode != "current" else None
        try:
            policy = host_gemm.policy()
            for name, build, reps, rounds in CASES:
                if quick:
                    rounds = max(1, rounds // 2)
                torch._dynamo.reset()
                t = _paired_times({"fp32": build(torch.float32), "bf16": build(torch.bfloat16)}, reps, rounds)
                t32, t16 = t["fp32"], t["bf16"]
                ratio = t16 / t32
                target = TARGET if policy.fp32_bf16 else None   # native bf16: the CPU's own kernel
                out.append({"case": name, "mode": policy.mode, "bf16_path": "fp32" if policy.fp32_bf16 else "native",
                            "bf16_s": t16, "fp32_s": t32, "ratio": ratio,
                            "ok": None if target is None else ratio <= target})
        finally:
            if previous is not None:
                host_gemm.restore(previous)
    return out


def print_rows(rs: list[dict]) -> None:
    import torch_neuronx

    info = torch_neuronx.host_info()
    print(f"host: {info['cpu']}, PyTorch CPU capability {info['cpu_capability']}, native bf16 GEMM "
          f"{info['native_bf16_gemm']}, {torch.get_num_threads()} thread(s), ONEDNN_MAX_CPU_ISA="
          f"{os.environ.get('ONEDNN_MAX_CPU_ISA', '(unset)')}")
    print(f"{'case':<58}{'mode/bf16 path':<18}{'bf16':>10}{'fp32 (bound)':>14}{'bf16/fp32':>11}  verdict")
    for r in rs:
        verdict = ("PASS" if r["ok"] else f"MISS (target <= {TARGET}x)") if r["ok"] is not None else \
            "(CPU kernel: no target)"
        print(f"{r['case']:<58}{r['mode'] + '/' + r['bf16_path']:<18}{r['bf16_s'] * 1e3:>8.2f}ms"
              f"{r['fp32_s'] * 1e3:>12.2f}ms{r['ratio']:>10.2f}x  {verdict}")


def diff_table(shapes=((256, 256, 256), (512, 1024, 768), (1024, 4096, 1024))) -> None:
    """Elements where the CPU's bf16/fp16 GEMM and fp32 accumulation rounded once differ."""
    torch.manual_seed(0)
    for dtype in (torch.bfloat16, torch.float16):
        for m, k, n in shapes:
            a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
            cpu, fp32 = a @ b, (a.float() @ b.float()).to(dtype)
            differ = cpu != fp32
            ulps = (cpu.view(torch.int16).int() - fp32.view(torch.int16).int()).abs()
            print(f"{str(dtype):15} {m}x{k}x{n}: {int(differ.sum())} of {differ.numel()} elements differ "
                  f"({differ.float().mean().item() * 100:.3f}%), {int(((ulps == 1) & differ).sum())} of them by one ulp")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="1: ratios in process CPU time")
    parser.add_argument("--mode", choices=("current", "all"), default="current",
                        help="all: also the native (CPU kernel) and fp32 policies in the same run")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--diff", action="store_true", help="print the CPU kernel vs fp32 accumulation table")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.diff:
        diff_table()
        return 0
    print_rows(rows(("current",) if args.mode == "current" else ("fp32", "native"), quick=args.quick))
    return 0


if __name__ == "__main__":
    sys.exit(main())
