"""`python -m torch_neuronx.plan train` in the planner's subcommand table (cli.py has the code)."""
from .cli import add_train_arguments as add_arguments, run_train as main

__all__ = ["add_arguments", "main"]
