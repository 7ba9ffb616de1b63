"""nki: the Neuron Kernel Interface (current dialect, NKI 0.3-0.6) on a NeuronCore simulator.

    import nki, nki.language as nl, nki.isa as nisa

    @nki.jit
    def add(a, b):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(a), nl.load(b)))
        return out

    c = nki.simulate(add)(a_np, b_np)        # numpy in, numpy out
    print(nki.last_run())                    # estimated trn2 time per engine, SBUF/PSUM use

``import nki`` is cheap (no numpy/torch); nki.language / nki.isa load numpy + ml_dtypes.

Public (``__all__``): ``jit``, ``simulate``, ``Kernel``, ``last_run``, ``NkiValidationError``,
``register_framework_handler`` / ``unregister_framework_handler``, the legacy ``baremetal`` /
``benchmark``, and the modules ``language`` (nl), ``isa`` (nisa) and ``typing`` (nt), each with
its own ``__all__``. ``nki.simulator.run`` is the lowest-level launch; ``nki.errors`` (codes) and
``nki.targets`` (per-target capacities) are read by tools. ``_core`` and ``_env`` are internal.
"""
from .errors import NkiValidationError
from .jit import Kernel, jit, register_framework_handler, simulate, unregister_framework_handler

__version__ = "0.6.0+sim"
__all__ = ["jit", "simulate", "Kernel", "NkiValidationError", "last_run", "language", "isa",
           "typing", "register_framework_handler", "unregister_framework_handler", "baremetal",
           "benchmark"]


def last_run():
    """RunReport of the most recent simulated launch (cost estimate, SBUF/PSUM usage)."""
    from .simulator.runner import last_report
    return last_report()


def baremetal(kernel, **kw):
    """Legacy alias: runs on the simulator (there is no device here)."""
    return simulate(kernel)


def benchmark(kernel, **kw):
    """Legacy alias: runs on the simulator; read the estimate from ``nki.last_run()``."""
    return simulate(kernel)


def __getattr__(name):
    if name in ("language", "isa", "typing", "simulator", "errors", "targets"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'nki' has no attribute {name!r}")
