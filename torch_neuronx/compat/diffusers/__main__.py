"""python -m torch_neuronx.compat.diffusers: the diffusers pipelines compatibility suite.

    python -m torch_neuronx.compat.diffusers [--pipelines flux,sd3] [--no-compile] [--out docs/diffusers-compat-report]

Each pipeline is built tiny from its configs (random weights), saved and reloaded with `from_pretrained`,
run for 2 steps on CPU, then on neuron eagerly, then on neuron with its denoiser compiled
(`compile_repeated_blocks(backend="neuron", fullgraph=True, dynamic=False)`, or `torch.compile` of the
denoiser where the model defines no repeated blocks) twice. It passes when neuron eager matches CPU
(within 1e-5: diffusers computes rope in fp32 on neuron where CPU uses fp64), the compiled output matches
CPU within 1e-3, and the second compiled call compiles nothing. Writes `<out>.md` and `<out>.json`.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time


def main(argv=None) -> int:
    from .report import write_report
    from .runner import run_spec
    from .specs import BY_NAME, SPECS

    p = argparse.ArgumentParser(prog="python -m torch_neuronx.compat.diffusers", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pipelines", help=f"comma-separated names (default all): {','.join(BY_NAME)}")
    p.add_argument("--no-compile", action="store_true", help="eager only")
    p.add_argument("--out", help="report path without extension (writes .md and .json)")
    args = p.parse_args(argv)
    specs = SPECS
    if args.pipelines:
        wanted = [w.strip() for w in args.pipelines.split(",") if w.strip()]
        unknown = [w for w in wanted if w not in BY_NAME]
        if unknown:
            p.error(f"unknown pipeline(s) {unknown}; known: {', '.join(BY_NAME)}")
        specs = [BY_NAME[w] for w in wanted]
    import torch

    torch.set_num_threads(max(1, torch.get_num_threads()))
    records = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="neuron_diffusers_compat_") as workdir:
        for spec in specs:
            rec = run_spec(spec, workdir, compile=not args.no_compile)
            records.append(rec)
            extra = f" [{rec['stage']}] {rec['error']}" if rec["status"] != "pass" else ""
            graphs = f" graphs={rec.get('graphs_compiled')} recompiles={rec.get('recompilations')}" \
                if "graphs_compiled" in rec else ""
            print(f"{spec.name:20s} {rec['status']}{graphs} ({rec['wall_s']}s){extra}", flush=True)
            if args.out:  # partial report after each pipeline, so an interrupted run still leaves one
                write_report(records, {"total": len(records), "passed": sum(r["status"] == "pass" for r in records),
                                       "compiled": not args.no_compile, "wall_s": round(time.perf_counter() - t0, 1),
                                       "partial": f"{len(records)}/{len(specs)}"}, args.out)
    summary = {"total": len(records), "passed": sum(r["status"] == "pass" for r in records),
               "compiled": not args.no_compile, "wall_s": round(time.perf_counter() - t0, 1)}
    print(json.dumps(summary))
    if args.out:
        write_report(records, summary, args.out)
    return 0 if summary["passed"] == summary["total"] else 1


if __name__ == "__main__":
    sys.exit(main())
