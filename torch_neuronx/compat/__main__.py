"""python -m torch_neuronx.compat: run the architecture compatibility sweep and write the report."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time


def _archs(selection: str | None) -> list[str]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    names = list(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    if not selection:
        return names
    wanted = [s.strip() for s in selection.split(",") if s.strip()]
    unknown = [w for w in wanted if w not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES]
    if unknown:
        raise SystemExit(f"unknown architecture(s) {unknown}: use model types of transformers' causal-LM "
                         f"auto mapping ({len(names)} of them, e.g. llama, gpt2, mistral)")
    return wanted


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m torch_neuronx.compat", description=__doc__)
    p.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1), help="parallel worker processes")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per architecture before the worker is killed")
    p.add_argument("--archs", help="comma-separated model types (default: the whole causal-LM mapping)")
    p.add_argument("--limit", type=int, help="only the first N architectures")
    p.add_argument("--no-compile", action="store_true", help="skip the compiled static-cache stage")
    p.add_argument("--out", default=os.path.join("docs", "compat-report"),
                   help="report path without extension (.md and .json are written)")
    p.add_argument("--cache-dir", help="compile cache folder (default: a fresh temporary one, i.e. a cold run)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    p.add_argument("--recycle", type=int, default=50, help="restart a worker after this many architectures")
    args = p.parse_args(argv)

    archs = _archs(args.archs)
    if args.limit:
        archs = archs[: args.limit]
    from . import report
    from .sweep import run_sweep

    work = tempfile.mkdtemp(prefix="neuron_compat_")
    cache_dir = args.cache_dir or os.path.join(work, "cache")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    t0 = time.monotonic()
    done = [0]

    def progress(r):
        done[0] += 1
        c = report.classify(r)
        status = ("cpu-fail" if not c["cpu_ok"] else
                  f"eager={'ok' if c['eager_ok'] else 'FAIL'} static={'skipped' if c['static_skipped'] else 'ok' if c['static_ok'] else ('n/a' if not c['cpu_static_ok'] else 'FAIL')}")
        extra = f" [{r.get('stage')}: {r.get('error_class')}]" if r.get("stage") else ""
        print(f"[{done[0]:3d}/{len(archs)} {time.monotonic() - t0:6.0f}s] {r['arch']:<28} {status}{extra}", flush=True)

    results, stats = run_sweep(archs, workers=args.workers, timeout=args.timeout, compile_static=not args.no_compile,
                               cache_dir=cache_dir, log_dir=os.path.join(work, "logs"), recycle=args.recycle,
                               threads=args.threads, progress=progress)
    summary = report.write(results, stats, args.out)
    pct = lambda v: "n/a" if v is None else f"{100 * v:.1f}%"  # noqa: E731
    print(f"\n{summary['architectures']} architectures, {summary['cpu_passing']} pass on CPU; neuron eager "
          f"{pct(summary['eager_pass_rate'])}, static compiled {pct(summary['static_compiled_pass_rate'])}; "
          f"{summary['wall_seconds']:.0f} s. Report: {args.out}.md / .json (worker logs: {work}/logs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
