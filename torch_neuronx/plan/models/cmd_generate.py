"""`python -m torch_neuronx.plan generate` in the planner's subcommand table (cli.py has the code)."""
from .cli import add_generate_arguments as add_arguments, run_generate as main

__all__ = ["add_arguments", "main"]
