"""`python -m torch_neuronx.plan <command>`: the planner's subcommands.

Each command is a row of `_commands()`: its flags (`add_arguments(parser)`), the function that runs
it, and for the model-level commands the options class its flags become (models/_options.py: built
and checked once, then passed down). Adding a command is one row. A plan that runs in a child
process (_child.py) ends as that child ended.
"""
from __future__ import annotations

import argparse
import gc
import signal
import sys
from typing import Callable, NamedTuple


class Command(NamedTuple):
    name: str
    help: str
    description: str
    add_arguments: Callable
    run: Callable            # run(options or the parsed Namespace) -> exit status
    options: type | None = None


def _commands() -> list[Command]:
    from . import _html_report as html_report, _run as run
    from .models import _cli as cli, _options as options, _sweep as sweep
    from .serve import _cli as serve

    def first_line(module) -> str:
        return (module.__doc__ or "").split("\n")[0]

    return [
        Command("run", "dry-run a script at full size: -- script.py args...", first_line(run),
                run.add_arguments, run.main),
        Command("generate", "plan generate() of a HF model from its config.json",
                "Plan a generate() of a Hugging Face model from its config.", cli.add_generate_arguments,
                cli.run_generate, options.GenerateOptions),
        Command("train", "plan a training step of a HF model from its config.json",
                "Plan a training step (AdamW) of a Hugging Face model from its config.", cli.add_train_arguments,
                cli.run_train, options.TrainOptions),
        Command("serve", "plan a vLLM deployment: vLLM's own scheduler on the estimated step times",
                first_line(serve), serve.add_arguments, serve.run, serve.ServeOptions),
        Command("sweep", "plan a training step for every layout of the lists given", first_line(sweep),
                sweep.add_arguments, sweep.main, options.SweepOptions),
        Command("html", "write a plan's --json report as one self-contained HTML page", first_line(html_report),
                html_report.add_arguments, html_report.main),
    ]


def main(argv: list[str] | None = None) -> int:
    from . import _child as child
    from .models._options import OptionsError

    parser = argparse.ArgumentParser(prog="python -m torch_neuronx.plan",
                                     description="Plan before you rent: dry runs with phantom device memory.")
    sub = parser.add_subparsers(dest="command", required=True)
    commands, parsers = {}, {}
    for c in _commands():
        parsers[c.name] = sub.add_parser(c.name, help=c.help, description=c.description)
        c.add_arguments(parsers[c.name])
        commands[c.name] = c
    args = parser.parse_args(argv)
    command = commands[args.command]
    child.bind_to_parent()   # a plan's child process ends with the plan that started it
    try:
        if command.options is not None:
            try:
                args = command.options.from_args(args)
            except OptionsError as err:
                print(f"{parsers[command.name].prog}: error: {err}", file=sys.stderr)
                raise SystemExit(2) from None   # as argparse stops on a bad flag
        return command.run(args)
    except child.RanInChild as done:
        return child.exit_like(done.returncode)
    except child.Interrupted:
        return child.exit_like(-signal.SIGINT)


if __name__ == "__main__":
    status = main()
    # The plan is written. What is left is the interpreter's last garbage collection over every object
    # the dry run made (Dynamo's and Inductor's graphs, the model): seconds per process, for nothing.
    # Frozen objects are out of its reach; atexit handlers and module teardown still run.
    gc.freeze()
    sys.exit(status)
