"""python -m torch_neuronx.numerics.sweep: which Hugging Face architectures
would hit Trainium's numerics differences (int64, integers via fp32,
float64, fp8), found with TORCH_NEURONX_NUMERICS=check on the compatibility
sweep's tiny models (same configs, same inputs), eager forward and a short
greedy generate, offline. The compatibility sweep lends its models at startup
(torch_neuronx/compat/_numerics_sweep.py registers into _sweep_models.py).

    python -m torch_neuronx.numerics.sweep --archs llama,gpt2 [--json out.json]

The parent starts one child in check mode (the mode is read at startup) and
prints a table of sites per architecture.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from ._sweep_models import model_runner

DEFAULT_ARCHS = "llama,gpt2,mistral,qwen2,gemma,phi,opt,bloom,falcon,gpt_neox,gptj,mixtral,qwen2_moe,mamba,rwkv,xlnet"
_MARK = "NUMERICS_SWEEP "


def _child(archs: list[str]) -> None:
    import torch

    from torch_neuronx import numerics

    assert numerics.mode() == "check", "the sweep child must run with TORCH_NEURONX_NUMERICS=check"
    run_model = model_runner()
    torch.set_num_threads(1)
    for arch in archs:
        numerics.reset_findings()
        row = {"arch": arch, "error": None}
        try:
            run_model(arch, "neuron")
        except Exception as err:  # noqa: BLE001 - a model that fails is reported, the sweep goes on
            row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:160] if str(err) else ''}"
        row["findings"] = numerics.findings()
        row["exposure"] = numerics.exposure()
        print(_MARK + json.dumps(row), flush=True)


def run(archs: list[str], timeout: float = 900.0) -> list[dict]:
    env = dict(os.environ, TORCH_NEURONX_NUMERICS="check", TORCH_NEURONX_NUMERICS_REPORT="0")
    proc = subprocess.run([sys.executable, "-m", "torch_neuronx.numerics.sweep", "--child", ",".join(archs)],
                          env=env, capture_output=True, text=True, timeout=timeout)
    rows = [json.loads(line[len(_MARK):]) for line in proc.stdout.splitlines() if line.startswith(_MARK)]
    if proc.returncode != 0 and len(rows) < len(archs):
        raise RuntimeError(f"numerics sweep child failed (rc {proc.returncode}): {proc.stderr[-2000:]}")
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| architecture | int64 ops (lossy) | integer ops via fp32 (lossy) | float64 ops (lossy) | fp8 ops (lossy) "
             "| int64 ops seen | lossy sites (op: worst value) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if r["error"]:
            lines.append(f"| {r['arch']} | | | | | did not run: {r['error']} |")
            continue
        cells = []
        for k in ("int64", "int_via_fp32", "float64", "fp8"):
            used = sum(r["exposure"].get(k, {}).values())
            lossy = sum(f["count"] for f in r["findings"] if f["kind"] == k)
            cells.append(f"{used} ({lossy})" if used else "-")
        int64_ops = ", ".join(op.split("::")[-1] for op in sorted(r["exposure"].get("int64", {}),
                                                                  key=lambda o: -r["exposure"]["int64"][o])[:6])
        sites = "; ".join(f"{os.path.basename(f['site'])} {f['op'].split('::')[-1]}: {f['worst']:.4g}"
                          for f in r["findings"][:4]) or "none"
        lines.append(f"| {r['arch']} | " + " | ".join(cells) + f" | {int64_ops or '-'} | {sites} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m torch_neuronx.numerics.sweep", description=__doc__.splitlines()[0])
    p.add_argument("--archs", default=DEFAULT_ARCHS, help="comma-separated model types")
    p.add_argument("--json", help="write the rows as JSON here")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(args.child.split(","))
        return 0
    rows = run([a.strip() for a in args.archs.split(",") if a.strip()])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
