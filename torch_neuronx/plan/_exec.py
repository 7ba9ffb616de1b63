"""Child of `plan run`: `python -m torch_neuronx.plan._exec script.py args...` under
TORCH_NEURONX_DRY_RUN=1 (torch_neuronx's registration has made the process a dry run).

A script that stops at an allocation that does not fit ends here with exit status 0: the report
(written at exit) says where and why, which is the answer the user asked for.
"""
from __future__ import annotations

import os
import runpy
import sys


def main(argv: list[str]) -> int:
    import torch

    import torch_neuronx  # noqa: F401 - registration enters the dry run
    from . import active, notes, progress

    if not argv:
        print("usage: python -m torch_neuronx.plan._exec script.py [args...]", file=sys.stderr)
        return 2
    if active() is None:
        print("torch_neuronx.plan._exec: TORCH_NEURONX_DRY_RUN=1 is not set; refusing to run the script "
              "for real", file=sys.stderr)
        return 2
    sys.argv = list(argv)
    progress.start("run")   # TORCH_NEURONX_PLAN_QUIET=1 (plan run --quiet) shows nothing
    progress.stage(f"running {os.path.basename(argv[0])}")
    clock = active().steps   # the dry run's step clock: its one optimizer-step hook

    def watch() -> None:
        progress.count("optimizer step")

    clock.listeners.append(watch)
    try:
        with notes.collect():   # into the at-exit report's notes (plan run -v streams them too)
            runpy.run_path(argv[0], run_name="__main__")
    except torch.OutOfMemoryError as err:
        run = active()
        if run is None or run.memory.oom is None:
            raise
        print(f"torch_neuronx.plan: the script stopped at an allocation that does not fit "
              f"({run.memory.oom['site']}): {str(err).splitlines()[0]}", file=sys.stderr)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        clock.listeners.remove(watch)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
