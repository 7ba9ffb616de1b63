"""Where the neuron device's extra time over CPU goes, per symbol, for one eager case.

One process alternates batches of the same step on CPU and on neuron (so both see the same
host state), `perf` samples it on the CPU clock, and each sample is assigned to the batch it
fell in. Printed: us per step on each device, then the symbols (and shared objects) whose
time per step differs most, neuron minus CPU. It observes only; it asserts nothing.

Needs Linux `perf` (Debian: linux-perf) with software events allowed
(kernel.perf_event_paranoid <= 2). Cases are those of benchmarks/eager_overhead.py.

    python benchmarks/bridge_profile.py                                  # the encoder block, 20 s
    python benchmarks/bridge_profile.py --case "(x*2).sum() fwd+bwd (16,)" --seconds 10
"""
from __future__ import annotations

import argparse
import bisect
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SAMPLE_HZ = 5000
BLOCK_CASE = "TransformerEncoderLayer fwd+bwd"


def run_child(case_name: str, seconds: float, phases_path: str) -> None:
    """The sampled process: alternating CPU and neuron batches, their monotonic spans saved."""
    import gc

    import torch

    import eager_overhead

    torch.set_num_threads(1)
    case = next(c for c in eager_overhead.CASES if c.name == case_name)
    fns = {d: case.build(d) for d in ("cpu", "neuron")}
    n = eager_overhead.calibrate(fns["cpu"], 0.1)  # calls per batch: ~0.1 s on CPU
    phases, end, i = [], time.monotonic() + seconds, 0
    gc.disable()
    while time.monotonic() < end:
        device = ("cpu", "neuron")[i % 2]
        i += 1
        t0 = time.clock_gettime(time.CLOCK_MONOTONIC)
        for _ in range(n):
            fns[device]()
        phases.append((device, t0, time.clock_gettime(time.CLOCK_MONOTONIC), n))
    with open(phases_path, "w") as f:
        json.dump(phases, f)


def attribute(samples_text: str, phases: list) -> tuple[dict, dict]:
    """(samples per (dso, symbol) per device, steps per device)."""
    starts = [p[1] for p in phases]
    per = {"cpu": collections.Counter(), "neuron": collections.Counter()}
    steps = collections.Counter()
    for device, _, _, n in phases:
        steps[device] += n
    line_re = re.compile(r"\s*([\d.]+):\s+\S+\s+(.*?)\s+\((\S+)\)\s*$")
    for line in samples_text.splitlines():
        m = line_re.match(line)
        if not m:
            continue
        t = float(m.group(1))
        i = bisect.bisect_right(starts, t) - 1
        if i < 0 or t > phases[i][2]:
            continue  # between batches (or before the first)
        symbol = m.group(2).split("+0x")[0]
        per[phases[i][0]][(os.path.basename(m.group(3)), symbol)] += 1
    return per, steps


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default=BLOCK_CASE, help="a case name of eager_overhead.py")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--child", metavar="PHASES_JSON", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        run_child(args.case, args.seconds, args.child)
        return 0
    import eager_overhead

    if args.case not in {c.name for c in eager_overhead.CASES}:
        parser.error(f"--case {args.case!r} is not one of: " + ", ".join(c.name for c in eager_overhead.CASES))
    perf = shutil.which("perf")
    if perf is None:
        print("bridge_profile: `perf` is not installed (Debian: apt-get install linux-perf); nothing measured")
        return 0
    with tempfile.TemporaryDirectory(prefix="bridge_profile_") as tmp:
        data, phases_path = os.path.join(tmp, "perf.data"), os.path.join(tmp, "phases.json")
        record = [perf, "record", "-q", "-k", "CLOCK_MONOTONIC", "-e", "cpu-clock", "-F", str(SAMPLE_HZ),
                  "-o", data, sys.executable, os.path.abspath(__file__), "--case", args.case,
                  "--seconds", str(args.seconds), "--child", phases_path]
        done = subprocess.run(record, capture_output=True, text=True)
        if done.returncode != 0 or not os.path.exists(phases_path):
            print(f"bridge_profile: perf record failed (exit {done.returncode}): {done.stderr.strip()[-400:]}")
            return 0
        script = subprocess.run([perf, "script", "-i", data, "-F", "time,ip,sym,dso"],
                                capture_output=True, text=True)
        with open(phases_path) as f:
            phases = json.load(f)
    per, steps = attribute(script.stdout, phases)
    us_per_sample = 1e6 / SAMPLE_HZ

    def us(device, key=None):
        count = per[device][key] if key else sum(per[device].values())
        return count * us_per_sample / max(steps[device], 1)

    cpu, neuron = us("cpu"), us("neuron")
    print(f"{args.case}: cpu {cpu:.1f} us/step, neuron {neuron:.1f} us/step, extra {neuron - cpu:+.1f} us "
          f"({neuron / cpu:.3f}x); {sum(steps.values())} steps, load {os.getloadavg()[0]:.1f}")
    keys = set(per["cpu"]) | set(per["neuron"])
    diff = sorted(((us("neuron", k) - us("cpu", k), k) for k in keys), reverse=True)
    print(f"\nneuron - cpu, us per step (one sample = {us_per_sample:.0f} us of CPU):")
    for v, (dso, symbol) in diff[:args.top]:
        print(f"{v:+8.2f}  {dso[:24]:<24} {symbol[:110]}")
    print("  ...")
    for v, (dso, symbol) in diff[-max(args.top // 3, 1):]:
        print(f"{v:+8.2f}  {dso[:24]:<24} {symbol[:110]}")
    by_dso = collections.Counter()
    for v, (dso, _) in diff:
        by_dso[dso] += v
    print("\nby shared object:")
    for dso, v in sorted(by_dso.items(), key=lambda kv: -abs(kv[1]))[:8]:
        print(f"{v:+8.2f}  {dso}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
