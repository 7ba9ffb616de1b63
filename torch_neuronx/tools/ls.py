"""neuron-ls: the virtual instance's Neuron devices and the processes using them.

Formats follow neuron-ls (docs/hardware-sources.md E): header lines, an ASCII table,
`-t` a torus picture, `-j` a JSON list of device objects.
"""
from __future__ import annotations

import argparse
import json
import sys

from .._version import __version__
from ..runtime.env import NeuronEnvironmentError
from ..runtime.units import size
from .api.devices import InstanceView, instance_view
from .api.registry import ProcessEntry, list_processes


def _ids(cores: tuple[int, ...]) -> str:
    if cores and list(cores) == list(range(cores[0], cores[-1] + 1)):
        return f"{cores[0]}-{cores[-1]}" if len(cores) > 1 else str(cores[0])
    return ",".join(map(str, cores))


def processes_by_chip(view: InstanceView, entries: list[ProcessEntry]) -> dict[int, list[ProcessEntry]]:
    """Processes that used a core of each chip."""
    out: dict[int, list[ProcessEntry]] = {}
    for e in entries:
        for chip in sorted({view.chip_of_core(e.global_core(d)) for d in e.devices}):
            out.setdefault(chip, []).append(e)
    return out


def to_json(view: InstanceView, entries: list[ProcessEntry]) -> list[dict]:
    procs = processes_by_chip(view, entries)
    return [{
        "neuron_device": chip.index, "bdf": chip.bdf, "cpu_affinity": chip.cpu_affinity,
        "numa_node": chip.numa_node, "connected_to": list(chip.connected), "nc_count": len(chip.logical_cores),
        "logical_neuroncore_config": view.lnc, "memory_size": chip.memory_bytes,
        "neuroncore_ids": list(chip.logical_cores),
        "neuron_processes": [{"pid": e.pid, "command": e.command, "neuron_runtime_version": e.runtime_version}
                             for e in procs.get(chip.index, [])],
    } for chip in view.chips]


def _table(headers: list[tuple[str, str]], rows: list[list[str]]) -> str:
    widths = [max(len(a), len(b)) for a, b in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row)]
    sep = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    line = lambda cells, center: "| " + " | ".join(  # noqa: E731
        (c.center(w) if center else c.ljust(w)) for c, w in zip(cells, widths)) + " |"
    out = [sep, line([a for a, _ in headers], True), line([b for _, b in headers], True), sep]
    out += [line(r, False) for r in rows]
    out.append(sep)
    return "\n".join(out)


def render_table(view: InstanceView, entries: list[ProcessEntry], wide: bool, show_procs: bool) -> str:
    procs = processes_by_chip(view, entries)
    if wide:
        headers = [("NEURON", "DEVICE"), ("NEURON", "CORES"), ("NEURON", "MEMORY"), ("CONNECTED", "DEVICES"),
                   ("PCI", "BDF"), ("PID", ""), ("COMMAND", ""), ("RUNTIME", "VERSION")]
    else:
        headers = [("NEURON", "DEVICE"), ("NEURON", "CORES"), ("NEURON", "CORE IDS"), ("NEURON", "MEMORY"),
                   ("CONNECTED", "DEVICES"), ("PCI", "BDF"), ("CPU", "AFFINITY"), ("NUMA", "NODE")]
        if show_procs:
            headers += [("PID", ""), ("COMMAND", ""), ("RUNTIME", "VERSION")]
    rows = []
    for chip in view.chips:
        chip_cells = [str(chip.index), str(len(chip.logical_cores))]
        if not wide:
            chip_cells.append(_ids(chip.logical_cores))
        chip_cells += [size(chip.memory_bytes, 0), ", ".join(map(str, chip.connected)), chip.bdf]
        if not wide:
            chip_cells += [chip.cpu_affinity, chip.numa_node]
        with_procs = wide or show_procs
        users = procs.get(chip.index, []) if with_procs else []
        if not with_procs:
            rows.append(chip_cells)
            continue
        if not users:
            rows.append(chip_cells + ["", "", ""])
        shown = users if (show_procs or not wide) else users[:1]  # --wide alone: one process per device
        for i, e in enumerate(shown):
            command = e.command if wide else (e.command[:24] + "..." if len(e.command) > 27 else e.command)
            cells = chip_cells if i == 0 else [""] * len(chip_cells)
            rows.append(cells + [str(e.pid), command, e.runtime_version])
    return _table(headers, rows)


def render_topology(view: InstanceView) -> str:
    """The chips as a grid; with 16 chips the 4x4 torus, `*––►` marking the wrap-around links."""
    side = 4
    if len(view.chips) != side * side:
        return "  ".join(f"[{c.index:>2}]" for c in view.chips) + "\n(no chip-to-chip links on this instance)"
    lines = []
    for r in range(side):
        cells = "◄––►".join(f"[{r * side + c:>2}]" for c in range(side))
        lines.append(f"*––►{cells}◄––*")
        if r < side - 1:
            lines.append("    " + "        ".join(" ▲▼ " for _ in range(side)))
    lines.append("*––► / ◄––*: wrap-around link to the other end of the row or column (4x4 2D torus)")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="neuron-ls", description="List the (virtual) Neuron devices of this "
                                "instance and the processes using them.")
    p.add_argument("-w", "--wide", action="store_true", help="wide table: full commands, runtime versions")
    p.add_argument("-a", "--show-all-procs", action="store_true", help="show every process using each device")
    p.add_argument("-t", "--topology", action="store_true", help="draw the chip-to-chip topology")
    p.add_argument("-j", "--json-output", action="store_true", help="print JSON instead of a table")
    p.add_argument("--version", action="version", version=f"neuron-ls (torch-neuronx {__version__}, virtual runtime)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)  # unknown flags: usage and exit status 2
    try:
        view = instance_view()
    except NeuronEnvironmentError as err:
        print(f"neuron-ls: {err}", file=sys.stderr)
        return 1
    entries = list_processes()
    if args.json_output:
        print(json.dumps(to_json(view, entries), indent=4))
        return 0
    print(f"instance-type: {view.instance_type}")
    print(f"instance-id: {view.instance_id}")
    print(f"logical-neuroncore-config: {view.lnc}")
    print(render_table(view, entries, args.wide, args.show_all_procs))
    if args.topology:
        print(render_topology(view))
    return 0


if __name__ == "__main__":
    sys.exit(main())
