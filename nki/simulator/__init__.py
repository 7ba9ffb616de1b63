"""The NeuronCore simulator: memory and capacity accounting, checks, cost model, runner.

The lead-facing entry point is :func:`run` (alias of ``runner.run_kernel``)::

    res = nki.simulator.run(kernel, (a, b), grid=(1,), target="trn2", mutable_args=("out",))
    res.outputs, res.report, res.mutated
"""


def __getattr__(name):
    if name in ("run", "run_kernel", "SimResult", "TensorSpec", "last_report"):
        from . import runner
        return {"run": runner.run_kernel}.get(name) or getattr(runner, name)
    if name == "RunReport":
        from .report import RunReport
        return RunReport
    raise AttributeError(name)
