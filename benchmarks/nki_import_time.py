"""Claim: `import nki` is cheap (it imports neither torch nor numpy).

Times `import nki` inside fresh interpreters (interpreter start-up excluded) and
prints the median, minimum and maximum. Target: median at most 100 ms. Prints
PASS/MISS, always exits 0 (shared machines are noisy; the unit test checks only
that torch and numpy stay unimported).

    python benchmarks/nki_import_time.py            # 10 runs, a few seconds
    python benchmarks/nki_import_time.py --runs 30
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

TARGET_MS = 100.0
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHILD = "import time; t = time.perf_counter(); import nki; print((time.perf_counter() - t) * 1e3)"


def run_once() -> float:
    out = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, check=True, capture_output=True,
                         text=True).stdout.split()
    return float(out[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="fresh interpreters (default 10)")
    args = parser.parse_args(argv)
    run_once()  # warm the page cache; not counted
    times = [run_once() for _ in range(args.runs)]
    median = statistics.median(times)
    verdict = "PASS" if median <= TARGET_MS else "MISS"
    print(f"import nki, {args.runs} fresh interpreters: median {median:.1f} ms "
          f"(min {min(times):.1f}, max {max(times):.1f}); target <= {TARGET_MS:.0f} ms: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
