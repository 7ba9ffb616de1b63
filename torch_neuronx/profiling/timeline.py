"""A timeline picture of an exported trace: measured host ops above, estimated device track below.

For docs and quick looks where Perfetto is not at hand; needs matplotlib
(`pip install matplotlib`). `python -m torch_neuronx.profiling.timeline trace.json out.png`.
"""
from __future__ import annotations

import sys

from . import _trace_file as trace_file

_COLORS = {"matmul": "#4878d0", "attention": "#6acc64", "elementwise": "#ee854a",
           "reduction": "#d65f5f", "copy": "#956cb4", "compiled graph": "#8c613c"}


def _cpu_rows(ops: list[dict]) -> list[tuple[int, dict]]:
    """(nesting depth, op) for the host ops of the busiest thread."""
    threads: dict = {}
    for e in ops:
        threads.setdefault(e["tid"], []).append(e)
    busiest = max(threads.values(), key=len)
    busiest.sort(key=lambda e: (e["ts"], -e["dur"]))
    rows, open_ends = [], []
    for e in busiest:
        while open_ends and open_ends[-1] <= e["ts"]:
            open_ends.pop()
        rows.append((len(open_ends), e))
        open_ends.append(e["ts"] + e["dur"])
    return rows


def _densest_window(kernels: list[dict], width: float) -> float:
    """Start (us) of the `width`-wide window holding the most device kernels."""
    starts = sorted(e["ts"] for e in kernels)
    best, best_count, j = starts[0], 0, 0
    for i, t in enumerate(starts):
        while starts[j] < t - width:
            j += 1
        if i - j + 1 > best_count:
            best, best_count = starts[j], i - j + 1
    return best


def _draw(ax, cpu, kernels, streams, names, rows, max_depth, t0, window=None):
    def visible(e):
        return window is None or (e["ts"] + e["dur"] >= window[0] and e["ts"] <= window[1])

    for depth, e in cpu:
        if visible(e):
            ax.broken_barh([((e["ts"] - t0) / 1e3, e["dur"] / 1e3)], (rows - 1 - depth + 0.1, 0.8),
                           facecolors="#707070" if depth == 0 else "#a8a8a8",
                           edgecolor="white", linewidth=0.4)
    labels = {rows - 1 - d: f"host ops, depth {d} (measured)" for d in range(max_depth)}
    for i, key in enumerate(streams):
        y = len(streams) - 1 - i
        for e in (k for k in kernels if (k["pid"], k["tid"]) == key and visible(k)):
            color = _COLORS.get(e["args"].get("category", ""), "#797979")
            ax.broken_barh([((e["ts"] - t0) / 1e3, e["dur"] / 1e3)], (y + 0.1, 0.8),
                           # overview: an edge in the bar's colour keeps 10 us kernels visible
                           facecolors=color, edgecolor="white" if window else color,
                           linewidth=0.3 if window else 0.8)
        core = names.get(key[0], f"neuron:{key[0]}").split(" ")[0]
        labels[y] = f"{core} stream {key[1]} (estimated)"
    ax.set_yticks([y + 0.5 for y in sorted(labels)])
    ax.set_yticklabels([labels[y] for y in sorted(labels)], fontsize=8)
    ax.set_ylim(0, rows)
    if window is not None:
        ax.set_xlim((window[0] - t0) / 1e3, (window[1] - t0) / 1e3)


def render(trace_path: str, png_path: str, max_depth: int = 4, title: str | None = None) -> str:
    """Draw the whole trace, and below it a zoom on its busiest stretch of device kernels."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise RuntimeError("rendering a timeline needs matplotlib: pip install matplotlib") from err
    trace = trace_file.load(trace_path)
    ops, kernels = trace_file.cpu_ops(trace), trace_file.device_events(trace)
    if not ops:
        raise ValueError(f"{trace_path}: the trace has no CPU ops to draw")
    t0 = min(e["ts"] for e in ops + kernels)
    names = trace_file.track_names(trace)
    streams = sorted({(e["pid"], e["tid"]) for e in kernels})
    cpu = [(d, e) for d, e in _cpu_rows(ops) if d < max_depth]
    rows = max_depth + len(streams)
    panels = 2 if kernels else 1
    fig, axes = plt.subplots(panels, 1, figsize=(14, panels * (1.2 + 0.5 * rows)), squeeze=False)
    _draw(axes[0][0], cpu, kernels, streams, names, rows, max_depth, t0)
    device_name = next(iter(names.get(k[0], "") for k in streams), "")
    axes[0][0].set_title(title or f"CPU track (measured) and device track ({device_name})", fontsize=9)
    if kernels:
        span = max(e["ts"] + e["dur"] for e in ops + kernels) - t0
        width = max(span / 40, 50.0)
        lo = _densest_window(kernels, width)
        _draw(axes[1][0], cpu, kernels, streams, names, rows, max_depth, t0, (lo, lo + width))
        axes[1][0].set_title(f"zoom: the {width / 1e3:.2f} ms with the most device kernels", fontsize=9)
        handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in _COLORS.values()]
        axes[1][0].legend(handles, list(_COLORS), loc="upper right", fontsize=7, ncol=len(_COLORS),
                          title="estimated device kernels by category", title_fontsize=7)
    axes[-1][0].set_xlabel("time since the first event (ms)")
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
    plt.close(fig)
    return png_path


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m torch_neuronx.profiling.timeline TRACE.json OUT.png")
    print(render(sys.argv[1], sys.argv[2]))
