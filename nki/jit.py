"""nki.jit kernels, nki.simulate, and the framework-handler hook.

Importing this module does not import numpy or torch; the simulator loads on first call.
"""
from __future__ import annotations

import functools

from . import _env

__all__ = ["jit", "simulate", "Kernel", "register_framework_handler"]

_handlers: list = []   # (predicate(arg) -> bool, handler(kernel, grid, args, kwargs))


def register_framework_handler(predicate, handler) -> None:
    """Route ``@nki.jit`` calls whose arguments match ``predicate`` to ``handler``.

    ``handler(kernel, grid, args, kwargs)`` returns the call's result. Used by a
    framework integration (e.g. torch tensors on device="neuron"). ``NKI_SIMULATOR=1``
    bypasses every handler and runs the simulator on numpy copies.
    """
    _handlers.append((predicate, handler))


def unregister_framework_handler(handler) -> None:
    _handlers[:] = [(p, h) for p, h in _handlers if h is not handler]


_plugins_loaded = False


def _load_framework_plugins() -> None:
    """Frameworks announce their handlers through the `nki.framework_handlers`
    entry-point group (torch-neuronx does); each is installed at the first
    kernel call, so importing a framework never pays for nki and vice versa."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    from importlib.metadata import entry_points

    for ep in entry_points(group="nki.framework_handlers"):
        try:
            ep.load()()
        except Exception as err:  # a broken plugin must not break kernels
            import warnings

            warnings.warn(f"nki: framework handler {ep.name!r} failed to load: {err}", stacklevel=3)


def _find_handler(args, kwargs):
    _load_framework_plugins()
    for pred, h in reversed(_handlers):
        for a in list(args) + list(kwargs.values()):
            try:
                if pred(a):
                    return h
            except Exception:  # a predicate must never break dispatch
                continue
    return None


class Kernel:
    """A kernel object from ``@nki.jit``.

    ``kernel(*args)`` runs it (on the simulator: this project has no Trainium);
    ``kernel[lnc](...)`` / ``kernel[gx, gy](...)`` launch a grid of programs
    (``nl.program_id``). Specialisations are cached per argument shapes, dtypes,
    constant arguments, grid and target.
    """

    def __init__(self, fn, **options):
        self.fn = fn
        self.options = options
        self.mutable_args = tuple(options.get("mutable_args", ()) or ())
        self._cache = {}
        self.hits = 0
        self.misses = 0
        self.last_report = None
        functools.update_wrapper(self, fn)

    def __repr__(self):
        return f"<nki.jit kernel {getattr(self.fn, '__name__', '?')}>"

    def __getitem__(self, grid):
        return _Launch(self, grid)

    def __call__(self, *args, **kwargs):
        return self._launch(None, args, kwargs)

    # -- cache -----------------------------------------------------------
    def specialization_key(self, grid, args, kwargs, target=None):
        from .simulator.runner import _grid_tuple, arg_key
        tgt = _env.normalize_target(target)
        return (_grid_tuple(grid), tgt, tuple(arg_key(a) for a in args),
                tuple((k, arg_key(v)) for k, v in sorted(kwargs.items())))

    def cache_info(self):
        """(hits, misses, number of cached specialisations)."""
        return (self.hits, self.misses, len(self._cache))

    # -- execution -------------------------------------------------------
    def _launch(self, grid, args, kwargs, *, target=None, force_sim=False, mutable_args=None,
                check_capacity=None):
        from .simulator.context import current_or_none
        if current_or_none() is not None:
            return self.fn(*args, **kwargs)      # a kernel called from a kernel is inlined
        if not force_sim and not _env.simulator_forced():
            h = _find_handler(args, kwargs)
            if h is not None:
                return h(self, grid, args, kwargs)
        return self.simulate_run(grid, args, kwargs, target=target, mutable_args=mutable_args,
                                 check_capacity=check_capacity).outputs

    def simulate_run(self, grid, args, kwargs, *, target=None, mutable_args=None,
                     check_capacity=None, compute=True):
        """Run on the simulator and return a SimResult (outputs, report, mutated)."""
        from . import language  # noqa: F401  (registers what Python operators on tensors do)
        from .simulator import runner
        key = self.specialization_key(grid, args, kwargs, target)
        spec = self._cache.get(key)
        if spec is not None and not compute:
            self.hits += 1
            return runner.SimResult(spec, self.last_report, ())
        res = runner.run_kernel(self.fn, args, kwargs, grid=grid, target=target,
                                mutable_args=self.mutable_args + tuple(mutable_args or ()),
                                compute=compute, check_capacity=check_capacity,
                                kernel_name=getattr(self.fn, "__name__", "kernel"))
        if spec is None:
            self.misses += 1
            self._cache[key] = _specs_of(res.outputs)
        else:
            self.hits += 1
        if compute:
            self.last_report = res.report
        return res

    def output_specs(self, *args, grid=None, target=None, **kwargs):
        """Trace the kernel without computing: the outputs' shapes and dtypes.

        Arguments may be shape/dtype-only objects (e.g. torch meta or fake tensors).
        """
        return self.simulate_run(grid, args, kwargs, target=target, compute=False).outputs


def _specs_of(out):
    from .simulator.runner import TensorSpec
    import numpy as np
    if isinstance(out, np.ndarray):
        return TensorSpec(out.shape, out.dtype)
    if isinstance(out, (tuple, list)):
        return type(out)(_specs_of(o) for o in out)
    if isinstance(out, dict):
        return {k: _specs_of(v) for k, v in out.items()}
    return out


class _Launch:
    """``kernel[grid]``: the same kernel launched on an SPMD grid / LNC degree."""

    def __init__(self, kernel, grid, **opts):
        self.kernel = kernel
        self.grid = grid
        self.opts = opts

    def __call__(self, *args, **kwargs):
        return self.kernel._launch(self.grid, args, kwargs, **self.opts)

    def output_specs(self, *args, **kwargs):
        return self.kernel.output_specs(*args, grid=self.grid, **kwargs)


def jit(fn=None, **options):
    """Decorator: ``@nki.jit`` or ``@nki.jit(mutable_args=("x",))`` -> :class:`Kernel`.

    Legacy options (``mode``, ``platform_target``, ...) are accepted and ignored.
    """
    if fn is None:
        return lambda f: jit(f, **options)
    if isinstance(fn, Kernel):
        return fn
    return Kernel(fn, **options)


class Simulated:
    """``nki.simulate(kernel)``: always runs on the simulator; numpy in, numpy out.

    ``sim(*arrays, **kw)`` returns the kernel's outputs; ``sim[grid](...)`` launches a
    grid; ``sim.report`` / ``nki.last_run()`` give the cost estimate and SBUF/PSUM usage;
    ``sim.run(*args)`` returns the full SimResult.
    """

    def __init__(self, kernel, target=None, mutable_args=None, check_capacity=None, grid=None):
        self.kernel = kernel if isinstance(kernel, Kernel) else Kernel(kernel)
        self.target = target
        self.mutable_args = mutable_args
        self.check_capacity = check_capacity
        self.grid = grid
        self.report = None

    def __getitem__(self, grid):
        return Simulated(self.kernel, self.target, self.mutable_args, self.check_capacity, grid)

    def run(self, *args, **kwargs):
        res = self.kernel.simulate_run(self.grid, args, kwargs, target=self.target,
                                       mutable_args=self.mutable_args,
                                       check_capacity=self.check_capacity)
        self.report = res.report
        return res

    def __call__(self, *args, **kwargs):
        return self.run(*args, **kwargs).outputs


def simulate(kernel, *, target=None, mutable_args=None, check_capacity=None):
    """Wrap ``kernel`` (an ``@nki.jit`` kernel or plain function) to run on the simulator.

    Args:
        target: "trn1" | "trn2" | "trn3" (default: NEURON_PLATFORM_TARGET_OVERRIDE, else trn2).
        mutable_args: parameter names the kernel may write (written back into the arrays).
        check_capacity: enforce SBUF capacity / PSUM banks (default NKI_CHECK_CAPACITY, on).
    """
    return Simulated(kernel, target, mutable_args, check_capacity)
