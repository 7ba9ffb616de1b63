"""Cold vs warm compile time of torch.compile(backend="neuron") across processes.

Runs the same small decoder-ish block in two fresh processes sharing an empty
TORCH_NEURONX_NEFF_CACHE_DIR and prints each process's backend compile time and
the warm/cold ratio (target: <= 0.25). Ratios only; the machine may be shared.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap

SCRIPT = textwrap.dedent("""
    import json, time, torch, torch_neuronx.compiler as c
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.LayerNorm(256), torch.nn.Linear(256, 1024), torch.nn.SiLU(),
                                torch.nn.Linear(1024, 256)).to("neuron")
    x = torch.randn(4, 128, 256, device="neuron", requires_grad=True)
    t = time.perf_counter()
    block = torch.compile(block, backend="neuron")
    block(x).square().mean().backward()
    first_call = time.perf_counter() - t
    m = c.get_dynamo_metrics()
    print("RESULT" + json.dumps({"compile_s": m["compile_time_s"], "first_call_s": first_call,
                                 "disk_hits": m["cache_hits_disk"], "misses": m["cache_misses"]}))
""")


def main() -> None:
    with tempfile.TemporaryDirectory() as cache_dir:
        env = dict(os.environ, TORCH_NEURONX_NEFF_CACHE_DIR=cache_dir)
        runs = []
        for label in ("cold", "warm"):
            out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(out.stderr[-2000:])
            runs.append(json.loads(out.stdout.split("RESULT", 1)[1]))
            print(f"{label}: {runs[-1]}")
        cold, warm = runs
        print(f"warm/cold backend compile time: {warm['compile_s'] / cold['compile_s']:.3f} (target <= 0.25)")
        print(f"warm/cold first call (incl. Dynamo tracing): {warm['first_call_s'] / cold['first_call_s']:.3f}")
        print(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    main()
