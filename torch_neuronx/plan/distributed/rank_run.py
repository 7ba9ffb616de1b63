"""One rank of a dry run: run the user's script under the estimate, then write this rank's report.

    python -m torch_neuronx.plan.distributed.rank_run --json RANK.json -- script.py args...

The launcher (launch.py) starts this with the environment torchrun would give the rank and
`TORCH_NEURONX_DRY_RUN=1`, so `init_process_group(backend="neuron")` builds the fake group of the
full world size. The report (see `rank_report`) holds what the merge needs: the peak device memory
of each core this rank used, its collectives by kind, its estimated time and its optimizer steps.
"""
from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import traceback

from . import report


class StepClock:
    """Estimated device time at the end of each optimizer step (the step boundaries of training)."""

    def __init__(self, est) -> None:
        self._est = est
        self.ends: list[float] = []
        self._handle = None

    def __enter__(self) -> "StepClock":
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self._handle = register_optimizer_step_post_hook(lambda *a, **k: self.ends.append(self._est.total_s))
        return self

    def __exit__(self, *exc) -> None:
        self._handle.remove()


def run_script(argv: list[str]) -> tuple[dict, int]:
    """Run `argv` (script and its arguments) as __main__; return (this rank's report, exit code)."""
    import torch_neuronx

    script = argv[0]
    code, error = 0, None
    old_argv = sys.argv
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    with torch_neuronx.estimate(include_fake=True) as est, StepClock(est) as clock:
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as e:   # scripts end with sys.exit(); a message is an error
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, (int, type(None))):
                error = str(e.code)
        except BaseException as e:  # noqa: BLE001 - reported to the launcher, then re-raised as exit 1
            code, error = 1, "".join(traceback.format_exception(type(e), e, e.__traceback__))
        finally:
            sys.argv = old_argv
    return report.rank_report(est, clock.ends, code, error), code


def main(args: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_neuronx.plan.distributed.rank_run")
    parser.add_argument("--json", required=True, help="where this rank's report goes")
    parser.add_argument("script", nargs=argparse.REMAINDER, help="-- script.py args...")
    ns = parser.parse_args(args)
    argv = ns.script[1:] if ns.script[:1] == ["--"] else ns.script
    if not argv:
        parser.error("give the script after --")
    data, code = run_script(argv)
    with open(ns.json, "w") as f:
        json.dump(data, f)
    if data.get("error"):
        print(data["error"], file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
