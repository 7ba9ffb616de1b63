"""Trainium numerics on the virtual core: TORCH_NEURONX_NUMERICS=host|check|trainium.

`install()` runs at startup (registration). In host mode it only reads the
environment; check and trainium install one dispatch mode (dispatch_mode.py) for the
life of the process, behind the C++ filter (cpp_filter.py) that keeps ops which
cannot differ out of Python. See docs/numerics.md.

Public (``__all__``): ``settings()`` and ``mode()`` (the settings in force, a ``NumericsConfig``),
``install()`` (startup), ``numerics_report()``, ``findings()``, ``exposure()``,
``reset_findings()`` (what check mode found) and ``key_fields()`` (the settings a compiled
program depends on), ``set_model_runner`` (the hook a higher layer gives the sweep its models
through). ``python -m torch_neuronx.numerics.sweep`` is the op sweep command. One
file per Trainium difference (float64, int64, int_via_fp32, fp8, stochastic_rounding,
collectives) and the dispatch machinery (dispatch_mode, cpp_filter, recompute, report) are
internal.
"""
from __future__ import annotations

import atexit
import sys
import warnings

from . import config as _config_mod
from ._sweep_models import set_model_runner
from .config import NumericsConfig

__all__ = ["NumericsConfig", "exposure", "findings", "install", "key_fields", "mode", "numerics_report",
           "reset_findings", "set_model_runner", "settings"]

_state: dict = {"config": None, "mode": None, "error": None}


def settings() -> NumericsConfig:
    """The settings in force (read from the environment once); raises on an invalid variable."""
    if _state["error"] is not None:
        raise _state["error"]
    if _state["config"] is None:
        _state["config"] = _config_mod.from_environment()
    return _state["config"]


def mode() -> str:
    """"host", "check" or "trainium"."""
    return settings().mode


def install() -> None:
    """Read the settings; in check/trainium push the numerics dispatch mode."""
    _register_with_compiler()
    try:
        cfg = settings()
    except _config_mod.NeuronEnvironmentError as err:
        # Registration must not fail: warn now (the message names the valid values),
        # run with host numerics, and raise again from numerics_report()/mode().
        _state["error"] = err
        warnings.warn(f"{err} Running with host numerics.", RuntimeWarning, stacklevel=2)
        return
    if cfg.stochastic_rounding and cfg.mode != "trainium":
        warnings.warn(
            f"{_config_mod.SR_ENABLE}=1 is emulated only with {_config_mod.MODE}=trainium "
            f"(now {cfg.mode}); rounding stays round-to-nearest-even.", RuntimeWarning, stacklevel=2)
    if cfg.mode == "host" or _state["mode"] is not None:
        return
    import torch.distributed

    if torch.distributed.is_available():
        from . import collectives

        collectives.install(mode)  # the neuron process group's integer sums through fp32
    from . import cpp_filter
    from .dispatch_mode import NumericsMode

    NumericsMode.skip_dynamo()
    numerics_mode = NumericsMode(cfg)
    # Never left: the mode lasts as long as the process.
    if not cpp_filter.enable(numerics_mode):
        numerics_mode.__enter__()  # this torch uses the filter's dispatch key: a Python mode, slower
    _state["mode"] = numerics_mode
    if cfg.mode == "check" and cfg.report_at_exit:
        atexit.register(_report_at_exit)


def _register_with_compiler() -> None:
    """The numerics settings join the compile cache key, and in check/trainium compiled graphs run
    op by op so that each op goes through the numerics mode (torch_neuronx/compiler/hooks.py)."""
    from ..compiler import hooks

    hooks.cache_key_fields.register("numerics", key_fields)
    hooks.op_by_op.register("numerics", lambda: mode() != "host")


def _report_at_exit() -> None:
    from .report import findings

    if findings():
        print(numerics_report(), file=sys.stderr)


def numerics_report() -> str:
    """A readable list of the places where Trainium would compute a different result."""
    from .report import format_report

    return format_report(mode())


def findings() -> list[dict]:
    """The report's sites as dicts: kind, op, site, count, worst, detail, message, advice."""
    from .report import findings as _findings

    return _findings()


def exposure() -> dict:
    """{kind: {op: count}}: ops that took an int64/float64/fp8/integer-via-fp32 path (check mode)."""
    from .report import exposure as _exposure

    return _exposure()


def reset_findings() -> None:
    from .report import reset

    reset()


def key_fields() -> tuple:
    """The numerics settings a compiled program depends on (compile cache key)."""
    return settings().key_fields()
