"""Claim: autoloading the neuron device adds little to `import torch`.

`import torch` autoloads torch-neuronx through the `torch.backends` entry point;
TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns that off. This script times
`import torch` in fresh interpreters with autoload on and off, interleaved
(the order alternates every round). The added time is the median of the
paired differences (on - off, run by run), which cancels most of the drift of a
shared machine; the difference of the medians and of the minima is printed too.
It also times `import torch_neuronx` inside one process with autoload off
(registration alone, without torch's entry-point scan). Target: at most 100 ms
added. Prints PASS/MISS, always exits 0.

    python benchmarks/import_time.py            # 10 runs each, ~20-50 s (import torch is ~1 s)
    python benchmarks/import_time.py --runs 20
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

TARGET_MS = 100.0

# Time only the import, inside the child: interpreter start-up is the same for
# both and would only add noise. The child also reports whether neuron loaded.
CHILD = (
    "import time; t = time.perf_counter(); import torch; t = time.perf_counter() - t; "
    "print(t * 1e3, hasattr(torch, 'neuron') and torch.neuron.is_available())"
)


def run_once(autoload: bool) -> tuple[float, bool]:
    env = dict(os.environ)
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "1" if autoload else "0"
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[-2]), out[-1] == "True"


def run_registration() -> float:
    code = ("import time, torch; t = time.perf_counter(); import torch_neuronx; "
            "print((time.perf_counter() - t) * 1e3)")
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs per setting (default 10)")
    args = parser.parse_args(argv)

    run_once(True), run_once(False)  # warm the page cache; not counted
    on, off = [], []
    loaded = set()
    for r in range(args.runs):
        for autoload in ((True, False) if r % 2 == 0 else (False, True)):
            ms, neuron = run_once(autoload)
            (on if autoload else off).append(ms)
            if autoload:
                loaded.add(neuron)
    med_on, med_off = statistics.median(on), statistics.median(off)
    paired = statistics.median(a - b for a, b in zip(on, off))
    registration = statistics.median(run_registration() for _ in range(3))
    print(f"import torch, {args.runs} fresh interpreters per setting (torch {_torch_version()})")
    print(f"  autoload off (TORCH_DEVICE_BACKEND_AUTOLOAD=0):   median {med_off:7.1f} ms "
          f"(min {min(off):.1f}, max {max(off):.1f})")
    print(f"  autoload on  (neuron registered: {str(loaded == {True}):<5}):        median {med_on:7.1f} ms "
          f"(min {min(on):.1f}, max {max(on):.1f})")
    verdict = "PASS" if paired <= TARGET_MS else "MISS"
    print(f"  added by autoload: {paired:.1f} ms (median of paired runs; difference of medians "
          f"{med_on - med_off:.1f} ms, of minima {min(on) - min(off):.1f} ms); "
          f"target <= {TARGET_MS:.0f} ms: {verdict}")
    print(f"  `import torch_neuronx` after `import torch` (autoload off, in-process): "
          f"{registration:.1f} ms")
    return 0


def _torch_version() -> str:
    from importlib.metadata import version

    return version("torch")


if __name__ == "__main__":
    sys.exit(main())
