"""`python -m torch_neuronx.plan <command>`: the planner's subcommands.

Each entry of COMMANDS is (name, module, help); the module has `add_arguments(parser)` and
`main(args) -> int`. Adding a command is one line here.
"""
from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = [
    ("run", "torch_neuronx.plan.run", "dry-run a script at full size: -- script.py args..."),
    ("generate", "torch_neuronx.plan.models.cmd_generate", "plan generate() of a HF model from its config.json"),
    ("train", "torch_neuronx.plan.models.cmd_train", "plan a training step of a HF model from its config.json"),
    ("sweep", "torch_neuronx.plan.models.sweep", "plan a training step for every layout of the lists given"),
    ("html", "torch_neuronx.plan.html_report", "write a plan's --json report as one self-contained HTML page"),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_neuronx.plan",
                                     description="Plan before you rent: dry runs with phantom device memory.")
    sub = parser.add_subparsers(dest="command", required=True)
    modules = {}
    for name, module, help_ in COMMANDS:
        mod = importlib.import_module(module)
        p = sub.add_parser(name, help=help_, description=(mod.__doc__ or "").split("\n")[0])
        mod.add_arguments(p)
        modules[name] = mod
    args = parser.parse_args(argv)
    return modules[args.command].main(args)


if __name__ == "__main__":
    sys.exit(main())
