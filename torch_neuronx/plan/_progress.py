"""Where a plan is while it runs: the stage, elapsed time and, for counted stages, what is left.

The plan commands call three functions at their stages; all are no-ops unless a command has
`start()`ed a display, so library code (plan/models, plan/_generation.py) may call them freely:

    progress.start("generate", quiet=args.quiet)     # the command, once
    progress.stage("building the model")              # a new stage (the previous one is done)
    progress.stage("generating", total=250, unit="token")
    progress.update(17)                               # 17 of 250 done: the estimate of what is left
    progress.finish()                                 # before printing the report

On a terminal it is a `rich` display on stderr (one line per stage, the current one with a bar
and the time left); when stderr is not a terminal (a pipe, a log file, CI) it is plain lines, at
most one per `PLAIN_EVERY_S` seconds for a counted stage. While Dynamo compiles, the current
stage says "compiling graph k" (torch._dynamo's compile callbacks: nothing is traced into a graph).
"""
from __future__ import annotations

import os
import sys
import time

PLAIN_EVERY_S = 10.0   # a counted stage prints a plain line at most this often (and at its end)
QUIET_ENV = "TORCH_NEURONX_PLAN_QUIET"   # a `plan run` child inherits --quiet through this
STARTED_ENV = "TORCH_NEURONX_PLAN_STARTED"   # a command's start and lines, for its child (handover())

_current: list = []   # the active display (at most one)


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def _process_age() -> float:
    """Seconds since this process started (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])   # field 22: start time after boot
        with open("/proc/uptime") as f:
            return max(0.0, float(f.read().split()[0]) - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def _left(elapsed: float, done: int, total: int | None) -> float | None:
    """Seconds left at the stage's mean rate so far (None before the first item or without a total)."""
    if not total or done <= 0 or done >= total:
        return None
    return elapsed / done * (total - done)


class _Plain:
    """Plain lines on a stream that is not a terminal: `[plan generate 0:12] building the model`."""

    def __init__(self, command: str, stream) -> None:
        self.command, self.stream = command, stream
        self._last_line = 0.0

    def line(self, t0: float, text: str) -> None:
        self.stream.write(f"[plan {self.command} {_clock(time.monotonic() - t0)}] {text}\n")
        self.stream.flush()
        self._last_line = time.monotonic()

    def stage(self, p: "Progress") -> None:
        self.line(p.t0, p.stage_name + (f" (0 of {p.total:,} {p.unit}s)" if p.total else ""))

    def update(self, p: "Progress", force: bool = False) -> None:
        if not force and time.monotonic() - self._last_line < PLAIN_EVERY_S:
            return
        self.line(p.t0, p.counted_text())

    def note(self, p: "Progress", text: str) -> None:
        self.line(p.t0, text)

    def close(self, p: "Progress", discard: bool = False, outcome: str = "done") -> None:
        if not discard:
            self.line(p.t0, outcome)


class _Rich:
    """A `rich` display on a terminal: finished stages with their time, the current one live with
    its count and the time left when it is counted (gone when the report is printed)."""

    def __init__(self, command: str, stream, t0) -> None:
        from rich.console import Console
        from rich.progress import (BarColumn, Progress as RichProgress, ProgressColumn, SpinnerColumn, TextColumn,
                                   TimeElapsedColumn)
        from rich.text import Text

        class Total(ProgressColumn):   # the command's whole time, its child process included
            def render(self, task) -> Text:
                return Text(f"(total {_clock(time.monotonic() - t0())})", style="dim")

        self.command = command
        self.console = Console(file=stream, stderr=stream is sys.stderr)
        self.bar = RichProgress(SpinnerColumn(finished_text="[green]✓"), TextColumn("{task.description}"),
                                BarColumn(bar_width=24), TextColumn("{task.fields[count]}"),
                                TimeElapsedColumn(), TextColumn("{task.fields[left]}"), Total(),
                                console=self.console, redirect_stdout=False, redirect_stderr=False,
                                transient=True)
        self.task = None
        self.bar.start()

    def _done(self) -> None:
        if self.task is not None:
            t = self.bar.tasks[self.task]
            self.bar.update(self.task, total=t.total or 1, completed=t.total or 1, left="")
            self.bar.stop_task(self.task)

    def stage(self, p: "Progress") -> None:
        self._done()
        self.task = self.bar.add_task(f"[bold]plan {self.command}[/]: {p.stage_name}", total=p.total,
                                      count=p.count_text(), left="")

    def update(self, p: "Progress", force: bool = False) -> None:
        if self.task is not None:
            left = _left(time.monotonic() - p.stage_t0, p.done, p.total)
            self.bar.update(self.task, completed=p.done, description=f"[bold]plan {self.command}[/]: {p.live_text()}",
                            count=p.count_text(), left=f"about {_clock(left)} left" if left is not None else "")

    def note(self, p: "Progress", text: str) -> None:
        self.update(p)

    def close(self, p: "Progress", discard: bool = False, outcome: str = "done") -> None:
        if discard:   # handed over: the lines stay until the next process's display replaces them
            if self.task is not None:
                self.bar.update(self.task, description=f"[bold]plan {self.command}[/]: {p.stage_name}: "
                                                       "starting the plan's own process")
            self.bar.live.transient = False
            self.bar.stop()
            return
        self._done()
        self.bar.stop()

    def lines(self) -> int:
        return len(self.bar.tasks)

    def take_over(self, lines: int) -> None:
        """Erase the `lines` the replaced process left, one by one (cursor up, erase the line: not
        clearing the screen, which terminals such as tmux keep in their scrollback)."""
        if lines > 0:
            self.console.file.write("\x1b[1A\x1b[2K" * lines + "\r")
            self.console.file.flush()


class Progress:
    """The display of one plan command (see the module's docstring)."""

    def __init__(self, command: str, stream=None, plain: bool | None = None) -> None:
        stream = stream or sys.stderr
        if plain is None:
            plain = not (hasattr(stream, "isatty") and stream.isatty())
        self.t0 = time.monotonic()
        self.stage_name, self.total, self.unit, self.done = "starting", None, None, 0
        self.stage_t0 = self.t0
        self.compiling: str | None = None
        self.graphs = 0
        self.prefix = ""
        self.view = _Plain(command, stream) if plain else _Rich(command, stream, lambda: self.t0)

    def stage(self, name: str, total: int | None = None, unit: str | None = None) -> None:
        name = self.prefix + name
        if self.total and isinstance(self.view, _Plain):   # a counted stage ends: how long it took
            self.view.line(self.t0, f"{self.stage_name}: {self.total:,} {self.unit}s in "
                                    f"{_clock(time.monotonic() - self.stage_t0)}")
        self.stage_name, self.total, self.unit, self.done = name, total, unit, 0
        self.stage_t0 = time.monotonic()
        self.view.stage(self)

    def update(self, done: int) -> None:
        self.done = done
        self.view.update(self, force=bool(self.total) and done >= self.total)

    def counted_text(self) -> str:
        text = self.stage_name
        if self.unit and not self.total:
            text += f": {self.unit} {self.done:,}"
        if self.total:
            text += f": {self.unit or 'item'} {self.done:,} of {self.total:,}"
            left = _left(time.monotonic() - self.stage_t0, self.done, self.total)
            text += f", about {_clock(left)} left" if left is not None else ""
        return text

    def live_text(self) -> str:
        return self.stage_name + (f": compiling graph {self.compiling}" if self.compiling else "")

    def count_text(self) -> str:
        if not self.unit:
            return ""
        return f"{self.unit} {self.done:,}" + (f" of {self.total:,}" if self.total else "")

    def compile_started(self) -> None:
        self.graphs += 1
        self.compiling = f"{self.graphs}"
        self.compile_t0 = time.monotonic()
        self.view.note(self, f"{self.stage_name}: compiling graph {self.graphs}")

    def compile_ended(self) -> None:
        self.compiling = None
        took = time.monotonic() - self.compile_t0
        if took >= 1.0 or not isinstance(self.view, _Plain):   # plain: only compiles worth a line
            self.view.note(self, f"{self.stage_name}: graph {self.graphs} compiled in {took:.0f} s")

    def close(self, discard: bool = False, outcome: str = "done") -> None:
        self.view.close(self, discard, outcome)


# ---- the functions plan code calls ---------------------------------------------------------------
def start(command: str, *, quiet: bool = False, stream=None, plain: bool | None = None,
          handed: str | None = None) -> Progress | None:
    """Show the progress of `command` (until `finish()`); `quiet` (or TORCH_NEURONX_PLAN_QUIET=1)
    shows nothing. `plain` forces plain lines (default: plain unless the stream is a terminal);
    `handed`: what `handover()` gave the process this one replaces (its clock and its lines)."""
    finish()
    if quiet or os.environ.get(QUIET_ENV) == "1":
        return None
    started, lines = None, 0
    if handed:
        when, _, count = handed.partition(":")
        started, lines = float(when), int(count or 0)
    p = Progress(command, stream, plain)
    p.wall_t0 = started or time.time() - _process_age()   # python's start and imports count too
    p.t0 -= max(0.0, time.time() - p.wall_t0)
    if isinstance(p.view, _Rich):
        p.view.take_over(lines)
    _current.append(p)
    _watch_compiles()
    return p


def stage(name: str, total: int | None = None, unit: str | None = None) -> None:
    """A new stage of the running command: `total` items of `unit` when they can be counted."""
    if _current:
        _current[-1].stage(name, total, unit)


def within(text: str) -> None:
    """Name the outer unit of work the next stages belong to ("layout 2 of 6"; "" ends it)."""
    if _current:
        _current[-1].prefix = f"{text}: " if text else ""


def update(done: int) -> None:
    """Items of the current counted stage done so far."""
    if _current:
        _current[-1].update(done)


_last_forward: list = [None]


def forward(tokens: int, key=None) -> None:
    """A generate() forward starts (plan/_generation.py): a decode forward (one token per sequence)
    means one more output token is done (the first comes from the prefill). `key` names the
    forward (its input ids): the dry run's and the plan's wrappers of generate() both report it."""
    if key is not None and key == _last_forward[0]:
        return
    _last_forward[0] = key
    if _current and tokens == 1:
        if _current[-1].total and _current[-1].unit == "token":
            _current[-1].update(_current[-1].done + 1)
        else:
            count("decode step")


def count(unit: str) -> None:
    """One more `unit` done in a stage whose total is not known (`plan run`: optimizer steps)."""
    if _current and not _current[-1].total:
        p = _current[-1]
        done = p.done + 1 if p.unit == unit else 1
        p.unit = unit
        p.update(done)


def finish(outcome: str = "done") -> None:
    """Close the display (before the report is printed); `outcome` is its last plain line."""
    while _current:
        _current.pop().close(outcome=outcome)


def active() -> bool:
    return bool(_current)


def handover() -> str | None:
    """Close the display for a child process that goes on with the command (plan/_child.py):
    its lines stay on the terminal until that process's display takes their place. Returns what
    that process's `start(handed=...)` needs (put it in TORCH_NEURONX_PLAN_STARTED)."""
    if not _current:
        return None
    p = _current.pop()
    lines = p.view.lines() if isinstance(p.view, _Rich) else 0
    p.close(discard=True)
    return f"{p.wall_t0!r}:{lines}"


# ---- compiles ------------------------------------------------------------------------------------
_watching: list = []


def _on_compile_start(*_args) -> None:
    if _current:
        _current[-1].compile_started()


def _on_compile_end(*_args) -> None:
    if _current:
        _current[-1].compile_ended()


def _register(dynamo=None) -> None:
    from torch._dynamo.callback import callback_handler

    callback_handler.register_start_callback(_on_compile_start)
    callback_handler.register_end_callback(_on_compile_end)


def _watch_compiles() -> None:
    """Dynamo's compile callbacks, registered once per process: at once when torch._dynamo is
    imported, else right after it is (importing it here would cost every plan seconds)."""
    if _watching:
        return
    _watching.append(True)
    if "torch._dynamo" in sys.modules:
        _register()
    else:
        from ._after_import import AfterImport

        sys.meta_path.insert(0, AfterImport("torch._dynamo", _register))
