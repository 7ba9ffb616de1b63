"""Draw a dry run's estimated device timeline (the Chrome trace of `plan run --trace`) as a PNG.

    python examples/plan_trace_picture.py trace.rank0.json trace.png [--title "..."] [--window 0.2,0.4]

One row per kind of work (matmul, attention, elementwise, collective:allreduce, graph, ...) of the
first logical core in the trace, each estimated event a bar at its start and duration; a second
panel shows the seconds of each kind. `--window a,b` zooms to a stretch of seconds. Chrome or
https://ui.perfetto.dev open the same file interactively.
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict


def timeline(trace: str, window: tuple[float, float] | None = None) -> tuple[str, dict, dict]:
    """(first core's track name, {kind: [(start s, duration s)]} within the window, {kind: total s})."""
    events = json.load(open(trace))["traceEvents"]
    if not events:
        raise SystemExit(f"plan_trace_picture: {trace} has no events")
    core = events[0]["pid"]
    rows: dict[str, list] = defaultdict(list)
    seconds: dict[str, float] = defaultdict(float)
    for e in events:
        if e["pid"] != core:
            continue
        start, dur = e["ts"] / 1e6, e["dur"] / 1e6
        seconds[e["cat"]] += dur
        if window and (start + dur < window[0] or start > window[1]):
            continue
        rows[e["cat"]].append((start, dur))
    return core, dict(rows), dict(seconds)


def draw(trace: str, out: str, title: str = "", window: tuple[float, float] | None = None) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    core, rows, seconds = timeline(trace, window)
    cats = sorted(rows, key=lambda c: -seconds[c])
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(14, 0.45 * len(cats) + 1.8), width_ratios=(4, 1), sharey=True)
    colors = plt.get_cmap("tab20")
    for i, cat in enumerate(cats):
        ax.broken_barh(rows[cat], (i - 0.4, 0.8), color=colors(i % 20), linewidth=0)
        bx.barh(i, seconds[cat], color=colors(i % 20))
    ax.set_yticks(range(len(cats)), cats)
    ax.invert_yaxis()
    ax.set_xlabel("estimated device time (s)")
    if window:
        ax.set_xlim(*window)
    bx.set_xlabel("seconds in total")
    fig.suptitle(title or f"{core}: estimated timeline")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return seconds


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace")
    p.add_argument("out")
    p.add_argument("--title", default="")
    p.add_argument("--window", default=None, help="a,b: seconds to show")
    args = p.parse_args()
    window = tuple(float(v) for v in args.window.split(",")) if args.window else None
    for cat, s in sorted(draw(args.trace, args.out, args.title, window).items(), key=lambda kv: -kv[1]):
        print(f"{cat:28} {s:10.4f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
