"""The runtime's own log, configured from the environment as the Neuron runtime's is.

NEURON_RT_LOG_LEVEL (ERROR, WARNING/WARN, INFO, DEBUG, TRACE, QUIET) and
NEURON_RT_LOG_LOCATION (console, syslog) set the logger `torch_neuronx.runtime`:
the runtime's start-up line (instance, cores, LNC, HBM), the notices about
variables that have no effect here, and whatever else the runtime says. Unset,
the logger follows Python's logging (warnings reach stderr).

TORCH_NEURONX_LOG_LEVEL (0-3) and TORCH_NEURONX_LOG_FILE do the same for every
`torch_neuronx.*` logger (compiler, planner, ...).
"""
from __future__ import annotations

import logging
import logging.handlers
import os
import sys

from . import env

LOG_LEVEL = "NEURON_RT_LOG_LEVEL"
LOG_LOCATION = "NEURON_RT_LOG_LOCATION"
PACKAGE_LOG_LEVEL = "TORCH_NEURONX_LOG_LEVEL"
PACKAGE_LOG_FILE = "TORCH_NEURONX_LOG_FILE"

RUNTIME_LOGGER = "torch_neuronx.runtime"
TRACE = 5  # below DEBUG, as the runtime's TRACE
_QUIET = logging.CRITICAL + 10  # nothing passes
_NRT_LEVELS = {"QUIET": _QUIET, "FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING,
               "WARNING": logging.WARNING, "INFO": logging.INFO, "DEBUG": logging.DEBUG, "TRACE": TRACE}
_PACKAGE_LEVELS = {"0": logging.WARNING, "1": logging.WARNING, "2": logging.INFO, "3": logging.DEBUG}
_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"
_MARK = "_torch_neuronx_env_handler"  # handlers installed here (replaced when configure runs again)


def _level(name: str, table: dict) -> int | None:
    raw = env.get(name)
    if raw is None:
        return None
    if raw.upper() not in table:
        raise env.NeuronEnvironmentError(f"{name}={env.quote(raw)} is not a log level; use one of "
                                         f"{', '.join(table)}, or unset it.")
    return table[raw.upper()]


def _handler(location: str) -> logging.Handler:
    if location == "syslog":
        if os.path.exists("/dev/log"):
            return logging.handlers.SysLogHandler(address="/dev/log")
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(_FORMAT))
        logging.getLogger(RUNTIME_LOGGER).warning(
            "%s=syslog: this machine has no /dev/log; the runtime log goes to the console", LOG_LOCATION)
        return handler
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(_FORMAT))
    return handler


def _install(logger: logging.Logger, level: int | None, handler: logging.Handler | None) -> None:
    for old in [h for h in logger.handlers if getattr(h, _MARK, False)]:
        logger.removeHandler(old)
        old.close()
    if level is not None:
        logger.setLevel(level)
    if handler is not None:
        setattr(handler, _MARK, True)
        logger.addHandler(handler)
        logger.propagate = False  # its own output: not twice through the root logger


def configure() -> None:
    """Apply the four variables (called at runtime start; a bad value raises, naming the variable)."""
    logging.addLevelName(TRACE, "TRACE")
    package_level = _level(PACKAGE_LOG_LEVEL, _PACKAGE_LEVELS)
    package_file = env.get(PACKAGE_LOG_FILE)
    if package_level is not None or package_file is not None:
        handler = logging.FileHandler(package_file) if package_file is not None else logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(_FORMAT))
        _install(logging.getLogger("torch_neuronx"), package_level, handler)
    level = _level(LOG_LEVEL, _NRT_LEVELS)
    location = env.get(LOG_LOCATION)
    if location is not None and location.lower() not in ("console", "syslog"):
        raise env.NeuronEnvironmentError(f"{LOG_LOCATION}={env.quote(location)} is not a log location; use "
                                         "console or syslog, or unset it.")
    if level is None and location is None:
        _install(logging.getLogger(RUNTIME_LOGGER), logging.NOTSET, None)  # Python's logging decides
        logging.getLogger(RUNTIME_LOGGER).propagate = True
        return
    _install(logging.getLogger(RUNTIME_LOGGER), level, _handler((location or "console").lower()))
