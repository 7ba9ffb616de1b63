"""What a dry run's compile costs: a full-width Qwen3-style decoder's forward compiled with
backend "neuron" inside a dry run, with vectorization off (what a dry run does, plan/compiled.py)
against Inductor's default vector ISA (the baseline, measured in the same run).

Each side runs in a fresh process with TORCH_NEURONX_DRY_RUN=1 (phantom weights: full width costs no
host memory) and reports the process CPU time of the first compiled call (Dynamo, AOTAutograd,
Inductor lowering and code generation; no C++ build on either side) and of the whole process. CPU
time is the figure to compare on a shared host. The wrapper programs of both sides are checked to
allocate the same buffers (the `call()` of each printed as equal or not).

    python benchmarks/plan_compile_speed.py                     # qwen3-27b-tp width, 2 layers, decode (B2 T1)
    python benchmarks/plan_compile_speed.py --layers 4 --tokens 512
Target: the dry compile at most **0.7x** the vectorizing one. Never asserts; exit 0.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
TARGET = 0.7

CHILD = r"""
import json, sys, time, hashlib
import torch, torch_neuronx
from torch._inductor.utils import run_and_get_code
from transformers import AutoConfig, AutoModelForCausalLM
from torch_neuronx.plan import compiled
config_dir, simdlen, tokens = sys.argv[1], sys.argv[2], int(sys.argv[3])
compiled.SIMDLEN = None if simdlen == "default" else int(simdlen)
config = AutoConfig.from_pretrained(config_dir)
with torch.device("neuron"):
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
ids = torch.zeros(2, tokens, dtype=torch.long, device="neuron")
fn = torch.compile(model, backend="neuron")
t0 = time.process_time()
with torch.no_grad():
    _, codes = run_and_get_code(fn, input_ids=ids, use_cache=False)
t1 = time.process_time()
calls = []
for code in codes:
    lines = code.splitlines()
    i = next(k for k, l in enumerate(lines) if l.lstrip().startswith("def call("))
    ind = len(lines[i]) - len(lines[i].lstrip())
    j = next((k for k in range(i + 1, len(lines)) if lines[k].strip() and len(lines[k]) - len(lines[k].lstrip()) <= ind), len(lines))
    calls.append("\n".join(lines[i:j]))
print("RESULT" + json.dumps({"compile_cpu_s": t1 - t0, "process_cpu_s": time.process_time(),
                             "call_sha": hashlib.sha256("".join(calls).encode()).hexdigest()[:16]}))
"""


def _config(src: str, layers: int, tmp: str) -> str:
    data = json.load(open(os.path.join(src, "config.json")))
    data["num_hidden_layers"] = layers
    data.pop("layer_types", None)
    data["max_window_layers"] = layers
    os.makedirs(os.path.join(tmp, "cfg"), exist_ok=True)
    json.dump(data, open(os.path.join(tmp, "cfg", "config.json"), "w"))
    return os.path.join(tmp, "cfg")


def _side(config_dir: str, simdlen: str, tokens: int) -> dict:
    env = {**os.environ, "TORCH_NEURONX_DRY_RUN": "1",
           "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.run([sys.executable, "-c", CHILD, config_dir, simdlen, str(tokens)], env=env,
                       capture_output=True, text=True, timeout=3600)
    line = next((l for l in p.stdout.splitlines() if l.startswith("RESULT")), None)
    if line is None:
        raise SystemExit(f"child failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return json.loads(line[len("RESULT"):])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=os.path.join(REPO, "examples", "configs", "qwen3-27b-tp"))
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=1, help="tokens per sequence (1: a decode step)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = _config(args.config, args.layers, tmp)
        base = _side(cfg, "default", args.tokens)   # baseline: Inductor's vector ISA
        dry = _side(cfg, "1", args.tokens)           # what a dry run compiles with
    ratio = dry["compile_cpu_s"] / base["compile_cpu_s"]
    print(f"{args.layers} layers, B2 T{args.tokens}, dry run, compile CPU s (first call)")
    print(f"  vectorizing (baseline): {base['compile_cpu_s']:.1f} s  (process {base['process_cpu_s']:.1f} s)")
    print(f"  dry run (scalar only):  {dry['compile_cpu_s']:.1f} s  (process {dry['process_cpu_s']:.1f} s)")
    print(f"  ratio {ratio:.2f} (target <= {TARGET}): {'PASS' if ratio <= TARGET else 'MISS'}")
    print(f"  wrapper call() identical: {base['call_sha'] == dry['call_sha']}")


if __name__ == "__main__":
    main()
