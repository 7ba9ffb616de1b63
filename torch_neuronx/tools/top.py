"""neuron-top: a live view of the virtual NeuronCores and the processes using them.

Sections as neuron-top's (docs/hardware-sources.md E): NeuronCore utilisation (`F`
toggles percent / TFLOPS), VCPU utilisation, memory usage summary and details;
tabs `all` plus one per process (Tab / arrow keys / 0-9), `q` quits.
Drawn with rich (Live display); `render()` builds one screen from two samples,
so tests can check it without a terminal.
"""
from __future__ import annotations

import argparse
import os
import select
import sys
import termios
import tty
from dataclasses import dataclass

from rich.console import Group
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from ..runtime.env import NeuronEnvironmentError
from ..runtime.units import size as _size
from .api import host
from .api.collector import ProcessRate, Sample, rates, take_sample
from .api.devices import InstanceView, instance_view


def _mem(n) -> str:
    """Bytes as neuron-top draws them: the one formatter, compact (`23.5GiB`, `0B`) so that a row of
    figures fits an 80-column terminal."""
    return _size(n, 1, space="")


@dataclass
class State:
    tab: int = 0          # 0: all processes, i: the i-th process
    tflops: bool = False  # `F`: TFLOPS instead of percent


def _tabs(procs: list[ProcessRate], state: State) -> Text:
    names = ["all"] + [f"{p.entry.pid}" for p in procs]
    text = Text()
    for i, name in enumerate(names):
        style = "reverse bold" if i == state.tab else ""
        text.append(f" [{i}] {name} ", style=style)
    text.append("   Tab/←/→: switch  F: % / TFLOPS  q: quit", style="dim")
    return text


def _cores_panel(view: InstanceView, shown: list[ProcessRate], state: State) -> Panel:
    per_core: dict[int, list[float]] = {}
    for p in shown:
        for c in p.cores:
            u, f = per_core.setdefault(c.core, [0.0, 0.0])
            per_core[c.core] = [min(100.0, u + c.utilization), f + c.flops]
    table = Table.grid(padding=(0, 1))
    if not per_core:
        table.add_row(Text("no NeuronCore in use", style="dim"))
    any_flops = any(f for _, f in per_core.values())
    for core in sorted(per_core):
        util, flops = per_core[core]
        if state.tflops:
            value = f"{flops / 1e12:8.3f} TFLOPS" if any_flops else "     n/a TFLOPS (estimates off)"
        else:
            value = f"{util:6.2f}%"
        table.add_row(f"NC{core:<3}", ProgressBar(total=100, completed=util, width=40), value)
    unit = "TFLOPS" if state.tflops else "%"
    return Panel(table, title=f"NeuronCore {view.core_version} Utilization ({unit})", title_align="left")


def _vcpu_panel(before: Sample, after: Sample, shown: list[ProcessRate]) -> Panel:
    usage = host.cpu_usage(before.cpu, after.cpu).get("all", {})
    table = Table.grid(padding=(0, 2))
    table.add_row("System", f"user {usage.get('user', 0):6.2f}%", f"system {usage.get('system', 0):6.2f}%")
    table.add_row("Runtime", f"user {sum(p.cpu_user for p in shown):6.2f}%",
                  f"system {sum(p.cpu_system for p in shown):6.2f}%")
    return Panel(table, title="VCPU Utilization", title_align="left")


def _memory_summary(view: InstanceView, shown: list[ProcessRate]) -> Panel:
    mem = host.memory_info()
    rss = sum(host.process_rss(p.entry.pid) for p in shown)
    tensors = sum(c.allocated for p in shown for c in p.cores)
    reserved = sum(c.reserved for p in shown for c in p.cores)
    hbm = view.hbm_per_core * sum(len(c.logical_cores) for c in view.chips)
    table = Table.grid(padding=(0, 2))
    table.add_row("Host", f"Total {_mem(mem['memory_total_bytes'])}", f"Tensors {_mem(0)}", f"Constants {_mem(0)}",
                  f"DMA Buffers {_mem(0)}", f"App. Memory {_mem(rss)}")
    table.add_row("Device", f"Total {_mem(hbm)}", f"Tensors {_mem(tensors)}", f"Constants {_mem(0)}",
                  f"Model Code {_mem(0)}", f"Runtime Memory {_mem(reserved - tensors)}", f"Model Scratchpad {_mem(0)}")
    return Panel(table, title="Memory Usage Summary", title_align="left")


def _memory_details(shown: list[ProcessRate]) -> Panel:
    tree = Tree("Model ID / Host Memory / Device Memory", guide_style="dim")
    if not shown:
        tree.add(Text("no process is using the NeuronCores", style="dim"))
    for p in shown:
        node = tree.add(f"pid {p.entry.pid}  {p.entry.command[:60]}  host {_mem(host.process_rss(p.entry.pid))}")
        for c in p.cores:
            # Estimated TFLOPS: FLOPs the cost model counted (torch_neuronx.estimate() on in that process).
            flops = f"  est. {c.flops / 1e12:.4f} TFLOPS" if c.flops else ""
            node.add(f"NC{c.core} (neuron:{c.local})  tensors {_mem(c.allocated)}  peak "
                     f"{_mem(c.allocated_peak)}  reserved {_mem(c.reserved)}  ops/s {c.ops / c.period:.0f}  "
                     f"graphs/s {c.graphs / c.period:.0f}{flops}")
    return Panel(tree, title="Memory Usage Details", title_align="left")


def render(view: InstanceView, before: Sample, after: Sample, state: State):
    procs = rates(before, after)
    state.tab = min(state.tab, len(procs))
    shown = procs if state.tab == 0 else [procs[state.tab - 1]]
    header = Text(f"neuron-top  {view.instance_type}  {view.instance_id}  LNC={view.lnc}  "
                  f"{len(procs)} process(es)", style="bold")
    return Group(header, _tabs(procs, state), _cores_panel(view, shown, state), _vcpu_panel(before, after, shown),
                 _memory_summary(view, shown), _memory_details(shown))


def handle_key(key: str, state: State, tabs: int) -> bool:
    """Apply a key press; False to quit."""
    if key in ("q", "Q"):
        return False
    if key in ("f", "F"):
        state.tflops = not state.tflops
    elif key in ("\t", "\x1b[C"):
        state.tab = (state.tab + 1) % (tabs + 1)
    elif key == "\x1b[D":
        state.tab = (state.tab - 1) % (tabs + 1)
    elif key.isdigit() and int(key) <= tabs:
        state.tab = int(key)
    return True


def _read_key(timeout: float) -> str | None:
    ready, _, _ = select.select([sys.stdin], [], [], timeout)
    if not ready:
        return None
    key = os.read(sys.stdin.fileno(), 8).decode(errors="ignore")
    return key


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="neuron-top", description="Live view of the (virtual) NeuronCores and "
                                "the processes using them.")
    p.add_argument("-d", "--delay", type=float, default=1.0, help="seconds between refreshes (default 1)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.delay <= 0:
        print("neuron-top: --delay must be > 0 seconds", file=sys.stderr)
        return 1
    try:
        view = instance_view()
    except NeuronEnvironmentError as err:
        print(f"neuron-top: {err}", file=sys.stderr)
        return 1
    if not sys.stdin.isatty():
        print("neuron-top: needs a terminal; use neuron-monitor for machine-readable output", file=sys.stderr)
        return 1
    state = State()
    before = after = take_sample()
    old_mode = termios.tcgetattr(sys.stdin)
    try:
        tty.setcbreak(sys.stdin.fileno())
        with Live(render(view, before, after, state), screen=True, auto_refresh=False) as live:
            waited = 0.0
            while True:
                key = _read_key(0.1)
                if key is not None:  # redraw the last samples at once
                    if not handle_key(key, state, len(after.processes)):
                        break
                    live.update(render(view, before, after, state), refresh=True)
                    continue
                waited += 0.1
                if waited >= args.delay:
                    before, after, waited = after, take_sample(), 0.0
                    live.update(render(view, before, after, state), refresh=True)
    except KeyboardInterrupt:
        pass
    finally:
        termios.tcsetattr(sys.stdin, termios.TCSADRAIN, old_mode)
    return 0


if __name__ == "__main__":
    sys.exit(main())
