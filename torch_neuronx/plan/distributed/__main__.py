"""`python -m torch_neuronx.plan.distributed run --nproc-per-node N ... -- script.py args` (the same
command as `python -m torch_neuronx.plan run` with a rank layout)."""
from __future__ import annotations

import sys

from .launch import main

if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] != ["run"]:
        print("usage: python -m torch_neuronx.plan.distributed run --nproc-per-node N [--nnodes M] "
              "[--all-ranks] -- script.py args...", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(args[1:]))
