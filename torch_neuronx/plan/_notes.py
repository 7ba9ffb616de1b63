"""A quiet terminal while planning: warnings and library log messages are collected, counted and
shown once in the report's notes instead of streamed (`-v` streams them as well).

    with notes.collect(verbose=False) as collected:
        ...plan...
    report["notes"] = collected.section(report["unmodelled_ops"], op_counts)

Collected: Python warnings (warnings.showwarning; the filters in force decide which are raised,
as they would be shown), log records of libraries' own stream handlers (transformers, torch; and
`logging.lastResort` for loggers without one), and transformers' tqdm bars ("Loading weights")
are switched off. Everything is restored on exit. The last collection of the process stays
readable (`last()`), so a dry run's at-exit report can carry it.
"""
from __future__ import annotations

import logging
import re
import sys
import warnings

VERBOSE_ENV = "TORCH_NEURONX_PLAN_VERBOSE"   # a `plan run` child inherits -v through this
_UNMODELLED = re.compile(r"no cost model for (\S+?);")
_MODE = re.compile(r"does not support mode=")

NOTE_CHARS = 200   # a note's first line in the markdown, at most
_last: list = []


class _Handler(logging.Handler):
    def __init__(self, owner: "Collected") -> None:
        super().__init__(logging.WARNING)
        self.owner = owner

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "_plan_noted", False):   # seen by a child logger's handler already
            return
        record._plan_noted = True
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string must not stop the plan
            text = str(record.msg)
        self.owner.add("log", f"{record.name}: {text}", f"{record.levelname.lower()} from {record.name}")


def _stream_handlers(logger: logging.Logger) -> list[logging.Handler]:
    return [h for h in logger.handlers
            if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)]


class Collected:
    """The notes of one plan: {(kind, text): [count, where]} in the order first seen."""

    def __init__(self, verbose: bool = False) -> None:
        self.verbose = verbose
        self.items: dict[tuple[str, str], list] = {}
        self._warnings = None
        self._removed: list[tuple[logging.Logger, logging.Handler]] = []
        self._last_resort = None
        self._handler = _Handler(self)
        self._bars_were_on = None
        self._finder = None

    def add(self, kind: str, text: str, where: str = "") -> None:
        entry = self.items.setdefault((kind, text.strip()), [0, where])
        entry[0] += 1

    # ---- capture --------------------------------------------------------------------------------
    def _showwarning(self, message, category, filename, lineno, file=None, line=None) -> None:
        text = str(message)
        kind = "ignored mode" if _MODE.search(text) else "warning"
        match = _UNMODELLED.search(text)
        if match:   # the report lists these with their op counts
            kind, text = "unmodelled op", match.group(1)
        self.add(kind, text, f"{category.__name__} at {short_path(filename)}:{lineno}")
        if self.verbose:
            self._original_show(message, category, filename, lineno, file, line)

    def _take_handlers(self, logger: logging.Logger) -> None:
        for h in _stream_handlers(logger):
            if not self.verbose:
                logger.removeHandler(h)
                self._removed.append((logger, h))
        if self._handler not in logger.handlers and (logger.handlers or not logger.propagate
                                                     or logger is logging.getLogger()):
            logger.addHandler(self._handler)
            self._removed.append((logger, None))

    def _quiet_transformers(self, module=None) -> None:
        from transformers.utils import logging as hf_logging

        hf_logging.get_logger("transformers")   # configures the library's root logger and handler
        self._take_handlers(logging.getLogger("transformers"))
        if self._bars_were_on is None and not self.verbose:
            self._bars_were_on = hf_logging.is_progress_bar_enabled()
            hf_logging.disable_progress_bar()

    def __enter__(self) -> "Collected":
        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        self._original_show = warnings.showwarning
        warnings.showwarning = self._showwarning
        for name in ["", *list(logging.Logger.manager.loggerDict)]:
            logger = logging.getLogger(name) if name else logging.getLogger()
            if isinstance(logger, logging.Logger) and _stream_handlers(logger):
                self._take_handlers(logger)
        self._last_resort, logging.lastResort = logging.lastResort, self._handler
        if "transformers.utils.logging" in sys.modules:
            self._quiet_transformers()
        else:   # imported by the planned script later: quiet it then
            from ._after_import import AfterImport

            self._finder = AfterImport("transformers.utils.logging", self._quiet_transformers)
            sys.meta_path.insert(0, self._finder)
        _last[:] = [self]
        return self

    def __exit__(self, *exc) -> None:
        if self._finder is not None and self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        for logger, handler in reversed(self._removed):
            if handler is None:
                logger.removeHandler(self._handler)
            else:
                logger.addHandler(handler)
        self._removed.clear()
        logging.lastResort = self._last_resort
        if self._bars_were_on:
            from transformers.utils import logging as hf_logging

            hf_logging.enable_progress_bar()
        self._warnings.__exit__(*exc)

    # ---- the report's section -------------------------------------------------------------------
    def section(self, unmodelled=None, op_counts: dict | None = None) -> list[dict]:
        """[{kind, text, count, where}]: unmodelled ops first (count = how often the op ran, when
        known), then modes the backend ignored, warnings and log messages (count = times raised).

        `unmodelled`: the ops the report's own recording could not cost; the notes list exactly
        those, so they agree with the report's `unmodelled_ops` (the cost model warns once per
        process, whichever estimate met the op first). Without it (a plan that stopped before its
        report), the ops the warnings named."""
        counts = {k.replace("::", "."): v for k, v in (op_counts or {}).items()}
        if unmodelled is None:
            ops = sorted({t for (k, t) in self.items if k == "unmodelled op"})
        else:
            ops = sorted(set(unmodelled))
        out = [{"kind": "unmodelled op", "text": op, "count": counts.get(op), "where": "cost model"}
               for op in sorted(ops, key=lambda o: -(counts.get(o) or 0))]
        order = {"ignored mode": 0, "warning": 1, "log": 2}
        rest = [(k, t, c, w) for (k, t), (c, w) in self.items.items() if k in order]
        out += [{"kind": k, "text": t, "count": c, "where": w} for k, t, c, w in
                sorted(rest, key=lambda r: order[r[0]])]
        return out


def short_path(path: str) -> str:
    """A warning's file without the site-packages prefix."""
    for marker in ("site-packages/", "dist-packages/", "/torch_neuronx/"):
        if marker in path:
            return ("torch_neuronx/" if marker == "/torch_neuronx/" else "") + path.split(marker, 1)[1]
    return path


def collect(verbose: bool = False) -> Collected:
    """Collect warnings and library log messages inside `with` (`verbose` also streams them)."""
    import os

    return Collected(verbose or os.environ.get(VERBOSE_ENV) == "1")


def last() -> Collected | None:
    """The process's most recent collection (the at-exit report of a `plan run` child reads it)."""
    return _last[0] if _last else None


def markdown(notes: list[dict]) -> list[str]:
    """The report's "Notes" section as markdown lines (empty without notes)."""
    if not notes:
        return []
    lines = ["", "## Notes", ""]
    ops = [n for n in notes if n["kind"] == "unmodelled op"]
    if ops:
        lines.append("- ops without a cost model (counted as Vector-engine ops by element count): "
                     + ", ".join(f"`{n['text']}`" + (f" ({times(n['count'])})" if n["count"] else "")
                                 for n in ops))
    for n in notes:
        if n["kind"] == "unmodelled op":
            continue
        label = {"ignored mode": "ignored", "warning": "warning", "log": "log"}[n["kind"]]
        first = n["text"].splitlines()[0] if n["text"] else ""
        first = first if len(first) <= NOTE_CHARS else first[:NOTE_CHARS - 3] + "..."   # the JSON has it all
        lines.append(f"- {label} ({times(n['count'])}, {n['where']}): {first}")
    return lines


def times(n: int) -> str:
    return "once" if n == 1 else f"{n:,} times"
