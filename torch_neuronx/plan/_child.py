"""The planner's one way to start a child process: `python -m torch_neuronx.plan <command> ...`.

The neuron runtime reads the instance type, the LNC and TORCH_NEURONX_DRY_RUN once, when it starts,
so a plan that needs other settings than this process has runs in a new process started here:
`plan run`'s script, each rank of a distributed plan, each row of a sweep, a `train`/`generate`
started outside its instance. The child is the same command line a user types, with the settings
in its environment (built by _command.py's `child_environment`, applied by `environment` here);
`is_child()` tells the command it is that process and must not start another.

Signals: the child starts in a session of its own, so a Ctrl-C at the terminal reaches this
process only, and this process forwards SIGINT, SIGTERM and SIGHUP to the child's process group
exactly once (a child that got the terminal's SIGINT and a forwarded one could be interrupted again
while it writes its report). When the child has ended, this process handles the signal as it
would have: SIGINT raises `Interrupted` (a KeyboardInterrupt; `python -m torch_neuronx.plan` then
exits as an interrupted Python does, without a second traceback), other signals take their former
disposition. A child whose parent dies (even by SIGKILL) gets SIGTERM (`bind_to_parent`).
"""
from __future__ import annotations

import collections
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable

CHILD_ENV = "TORCH_NEURONX_PLAN_CHILD"   # set in a child's environment: the parent's process id
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
TAIL_LINES = 40   # lines of a captured child's output kept for an error message
WAIT_SLICE_S = 0.5   # the longest a forwarded signal waits in this process (Child.wait)


class Interrupted(KeyboardInterrupt):
    """This process got SIGINT while a child ran; the child has ended and said what it had to."""


class RanInChild(Exception):
    """The command ran in a child (its runtime had to start with other settings); the child's exit
    status is the command's (`python -m torch_neuronx.plan` ends with it: `exit_like`)."""

    def __init__(self, returncode: int) -> None:
        super().__init__(returncode)
        self.returncode = returncode


@dataclass(frozen=True)
class Result:
    returncode: int            # negative: the child ended by that signal
    stdout_tail: tuple = ()    # the last TAIL_LINES lines of each captured stream
    stderr_tail: tuple = ()    # (empty when the child wrote to this process's own streams)
    timed_out: bool = False


def environment(settings: dict, base=None) -> dict:
    """This process's environment (or `base`) with `settings` applied (None removes a variable),
    marked as a planner child."""
    env = dict(os.environ if base is None else base)
    for name, value in settings.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = str(value)
    env[CHILD_ENV] = str(os.getpid())
    # A plan is reproducible: the hash seed orders sets and with them the order some tensors are
    # freed in, which moves a planned peak by up to ~0.1% from run to run. A seed the user set stays.
    env.setdefault("PYTHONHASHSEED", "0")
    return env


_marked: list = []   # [parent pid or None], read once from the environment


def is_child() -> bool:
    """Was this process started by `Child` (read once; the mark is removed from the environment,
    so processes this one starts are not children unless started here too)?"""
    if not _marked:
        text = os.environ.pop(CHILD_ENV, None)
        _marked.append(int(text) if text and text.isdigit() else None)
    return _marked[0] is not None


def bind_to_parent() -> None:
    """In a child: get SIGTERM when the parent dies (Linux prctl PR_SET_PDEATHSIG), so a killed
    planner leaves no plan running."""
    if not is_child() or not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != _marked[0]:   # the parent died before the prctl
        os.kill(os.getpid(), signal.SIGTERM)


def command(argv: list[str]) -> list[str]:
    """The planner's own command line: `python -m torch_neuronx.plan ARGV`."""
    return [sys.executable, "-m", "torch_neuronx.plan", *argv]


# ---- signals: forwarded to the running children, handled here once they end ----------------------
class _Supervisor:
    def __init__(self) -> None:
        self.depth = 0
        self.children: set = set()
        self.got: list[int] = []
        self.saved: dict = {}

    @property
    def forwarding(self) -> bool:
        return bool(self.saved)

    def forward(self, sig, _frame) -> None:
        self.got.append(sig)
        for c in list(self.children):
            c.catch_up()


_supervisor = _Supervisor()


@contextlib.contextmanager
def supervise():
    """Forward FORWARDED signals to the children started inside (from the main thread; elsewhere
    children share this process's group and get the terminal's signals themselves). On leaving,
    children still running are killed, and a signal got meanwhile is handled as it would have been."""
    s = _supervisor
    outermost = s.depth == 0
    if outermost and threading.current_thread() is threading.main_thread():
        for sig in FORWARDED:
            if signal.getsignal(sig) is not signal.SIG_IGN:   # ignored (a background job's SIGINT): stays so
                s.saved[sig] = signal.signal(sig, s.forward)
    s.depth += 1
    try:
        yield
    finally:
        s.depth -= 1
        if outermost:
            for c in list(s.children):
                c.kill()
            for sig, handler in s.saved.items():
                signal.signal(sig, signal.SIG_DFL if handler is None else handler)   # None: set outside Python
            saved, got = s.saved, s.got
            s.saved, s.got = {}, []
            if got:
                _deliver(got[0], saved[got[0]])


def _deliver(sig: int, handler) -> None:
    if sig == signal.SIGINT and handler is signal.default_int_handler:
        raise Interrupted()
    signal.raise_signal(sig)   # its former handler (the default ends this process as the signal does)


class Child:
    """One running child: `python -m torch_neuronx.plan ARGV` in `env`. Its output goes to this
    process's streams, or with `capture` is read line by line (`on_line(line)` sees each; the
    tails are kept); `merge` puts its stderr into its stdout."""

    def __init__(self, argv: list[str], env: dict, *, capture: bool = False, merge: bool = False,
                 on_line: Callable[[str], None] | None = None) -> None:
        own_session = _supervisor.forwarding
        sys.stdout.flush()
        sys.stderr.flush()
        pipe = subprocess.PIPE if capture else None
        self.proc = subprocess.Popen(command(argv), env=env, stdout=pipe,
                                     stderr=(subprocess.STDOUT if merge else pipe) if capture else None,
                                     text=True, errors="replace", start_new_session=own_session)
        self._group = own_session
        self._tails = {"stdout": collections.deque(maxlen=TAIL_LINES), "stderr": collections.deque(maxlen=TAIL_LINES)}
        self._pumps = [threading.Thread(target=self._pump, args=(stream, self._tails[name], on_line), daemon=True)
                       for name, stream in (("stdout", self.proc.stdout), ("stderr", self.proc.stderr)) if stream]
        for t in self._pumps:
            t.start()
        self.timed_out = False
        self._forwarded = 0
        _supervisor.children.add(self)
        self.catch_up()   # a signal got before it started (in the same supervise) reaches it too

    def catch_up(self) -> None:
        """Forward the signals this process got since the child started (each once)."""
        got = _supervisor.got
        while self._forwarded < len(got):
            self._forwarded += 1
            self.signal(got[self._forwarded - 1])

    @staticmethod
    def _pump(stream, tail, on_line) -> None:
        for line in stream:
            tail.append(line)
            if on_line is not None:
                on_line(line)

    def signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig) if self._group else self.proc.send_signal(sig)
        except (ProcessLookupError, PermissionError):
            pass

    def kill(self) -> None:
        """End the child and everything it started (timeout, or this process gives up on it)."""
        if self.proc.poll() is None:
            self.signal(signal.SIGKILL)
        self.proc.wait()
        _supervisor.children.discard(self)

    def poll(self) -> int | None:
        return self.proc.poll()

    def wait(self, timeout: float | None = None) -> Result:
        # Waited for in short slices, never in one blocking waitpid: a signal the kernel hands to
        # another of this process's threads (torch's) does not interrupt the main thread's waitpid,
        # and the Python handler that forwards it runs only when the main thread is back in the
        # interpreter; a blocking wait would then hold the signal until the child ends by itself.
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            left = WAIT_SLICE_S if end is None else min(WAIT_SLICE_S, end - time.monotonic())
            try:
                self.proc.wait(max(left, 0.0))
                break
            except subprocess.TimeoutExpired:
                if end is not None and time.monotonic() >= end:
                    self.timed_out = True
                    self.kill()
                    break
        _supervisor.children.discard(self)
        for t in self._pumps:
            t.join()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream:
                stream.close()
        return Result(self.proc.returncode, tuple(self._tails["stdout"]), tuple(self._tails["stderr"]),
                      self.timed_out)


def run(argv: list[str], env: dict, *, timeout: float | None = None, capture: bool = False,
        merge: bool = False, on_line: Callable[[str], None] | None = None) -> Result:
    """Run one child to its end (`timeout` seconds at most: then it is killed, `timed_out`)."""
    with supervise():
        return Child(argv, env, capture=capture, merge=merge, on_line=on_line).wait(timeout)


def exit_like(returncode: int) -> int:
    """The exit status of a command whose child ended with `returncode`: the same, and a child ended
    by a signal ends this process by that signal too (a SIGINT so ends Python after an uncaught
    KeyboardInterrupt, here without a second traceback: the child has printed what it had to)."""
    if returncode >= 0:
        return returncode
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(-returncode, signal.SIG_DFL)
    os.kill(os.getpid(), -returncode)
    return 128 - returncode   # a signal this process ignores or blocks: the shell's number for it
