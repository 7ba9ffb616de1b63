"""Record a memory snapshot of a training step on neuron and draw it.

Writes the snapshot pickle, PyTorch's own interactive viewer of it
(`torch.cuda._memory_viz.trace_plot` / `segment_plot`: HTML pages that need a
browser), and with --png a picture of the same two views drawn with
matplotlib from the snapshot's data: the active-memory timeline of the trace
entries (what trace_plot's "Active Memory Timeline" shows) and the segments
with their blocks (what segment_plot shows), using _memory_viz's own
`calc_active` and `_format_size`.

    python examples/memory_snapshot_picture.py --out /tmp/snap --png docs/images/memory-snapshot.png
"""
from __future__ import annotations

import argparse
import os
import pickle

import torch
import torch.cuda._memory_viz as memory_viz
import torch.nn as nn


def record(out: str) -> dict:
    torch.manual_seed(0)
    model = nn.TransformerEncoderLayer(128, 4, 512, batch_first=True, dropout=0.0).to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(4, 64, 128, device="neuron")
    torch.neuron.memory._record_memory_history(max_entries=20000)
    for _ in range(2):
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad()
    path = os.path.join(out, "snapshot.pickle")
    torch.neuron.memory._dump_snapshot(path)
    torch.neuron.memory._record_memory_history(enabled=None)
    with open(path, "rb") as f:
        return pickle.load(f)


def timeline(trace: list[dict], segments: list[dict]) -> tuple[list[float], list[int], list[int]]:
    """(ms, active bytes, reserved bytes) after each trace entry. Memory allocated before
    recording started has no entries: the start values are the snapshot's final state minus
    the trace's net change."""
    t0 = trace[0]["time_us"] if trace else 0
    ms, active, reserved = [], [], []
    a = sum(memory_viz.calc_active(s) for s in segments) - sum(
        {"alloc": e["size"], "free_completed": -e["size"]}.get(e["action"], 0) for e in trace)
    r = sum(s["total_size"] for s in segments) - sum(
        {"segment_alloc": e["size"], "segment_free": -e["size"]}.get(e["action"], 0) for e in trace)
    for e in trace:
        a += {"alloc": e["size"], "free_completed": -e["size"]}.get(e["action"], 0)
        r += {"segment_alloc": e["size"], "segment_free": -e["size"]}.get(e["action"], 0)
        ms.append((e["time_us"] - t0) / 1e3)
        active.append(a)
        reserved.append(r)
    return ms, active, reserved


def draw(snapshot: dict, png: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    trace = snapshot["device_traces"][0]
    segments = sorted((s for s in snapshot["segments"] if s["device"] == 0), key=lambda s: -s["total_size"])
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 8), gridspec_kw={"height_ratios": [1, 1.3]})
    ms, active, reserved = timeline(trace, segments)
    mib = 1 << 20
    top.step(ms, [r / mib for r in reserved], where="post", color="tab:gray", label="reserved (segments)")
    top.fill_between(ms, [a / mib for a in active], step="post", color="tab:blue", alpha=0.6,
                     label="active (allocated blocks)")
    top.set_xlabel("time (ms)")
    top.set_ylabel("MiB")
    top.set_title("neuron:0 active memory timeline (trace entries of torch.neuron.memory._snapshot())")
    top.legend(loc="upper left")
    colours = {"active_allocated": "tab:blue", "inactive": "tab:olive"}
    for row, seg in enumerate(segments):
        base, total = seg["address"], seg["total_size"]
        bottom.barh(row, total / mib, color="whitesmoke", edgecolor="black", linewidth=0.5)
        offset = 0
        for b in seg["blocks"]:
            bottom.barh(row, b["size"] / mib, left=offset / mib, color=colours.get(b["state"], "tab:red"),
                        edgecolor="white", linewidth=0.3)
            offset += b["size"]
        bottom.text(total / mib, row, f"  {seg['segment_type']} pool, {memory_viz._format_size(total)}, "
                    f"active {memory_viz._format_size(memory_viz.calc_active(seg))}", va="center", fontsize=7)
        del base
    bottom.set_yticks(range(len(segments)), [f"seg {i}" for i in range(len(segments))], fontsize=7)
    bottom.invert_yaxis()
    bottom.set_xlabel("offset in segment (MiB)")
    bottom.set_title("segments at the snapshot (blue: allocated blocks, olive: cached free blocks)")
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="./neuron_memory")
    parser.add_argument("--png", help="also draw the timeline and segments to this PNG (needs matplotlib)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    snapshot = record(args.out)
    with open(os.path.join(args.out, "trace.html"), "w") as f:
        f.write(memory_viz.trace_plot(snapshot))
    with open(os.path.join(args.out, "segments.html"), "w") as f:
        f.write(memory_viz.segment_plot(snapshot))
    print(memory_viz.segsum(snapshot))
    if args.png:
        draw(snapshot, args.png)
        print("wrote", args.png)


if __name__ == "__main__":
    main()
