"""Stopping a group's transport threads while the interpreter is alive.

gloo runs every collective on its own worker threads. A finished call's last
references (the host views of our tensors, and the thread-local state gloo
captures with each call, which holds Python objects when the call was made
during a backward pass) may be dropped by that worker a moment after the
caller's `wait()` returned. Dropping them takes the GIL. If the process is
already finalizing by then, CPython ends the worker thread inside a C++
destructor and the process aborts ("terminate called without an active
exception"), rarely, and only under CPU contention.

Destroying the gloo backend joins its workers, and torch releases the GIL
while it does, so every pending release finishes first. A group therefore
drops its transport on `shutdown()` (which `destroy_process_group` calls), and
groups still alive when the interpreter exits are shut down by an `atexit`
hook, which runs before finalization starts. A join can only block on a
collective that is still in flight (one a rank abandoned, whose peers never
join); the exit hook waits for that at most `EXIT_WAIT_S` and then leaves the
threads running, as torch's own gloo backend always does.
"""
from __future__ import annotations

import atexit
import threading
import weakref

EXIT_WAIT_S = 10.0

_live: weakref.WeakSet = weakref.WeakSet()
_hook_installed = False


class ClosedTransport:
    """Stands in for a released transport: any use names what happened and what to do."""

    def __init__(self, group: str):
        self._group = group

    def __getattr__(self, name: str):
        raise RuntimeError(
            f"torch_neuronx: process group {self._group} was shut down (destroy_process_group, abort, or "
            f"interpreter exit), so it cannot run '{name}'. Create a new group with "
            "torch.distributed.init_process_group or new_group.")


def track(group) -> None:
    """Remember `group` (weakly) so that the exit hook can release its transport."""
    global _hook_installed
    _live.add(group)
    if not _hook_installed:
        atexit.register(release_all_at_exit)
        _hook_installed = True


def leak(transport) -> None:
    """Never destroy `transport`: an aborted group's worker may be stuck in a collective, and destroying
    the transport would join it. A module-level list would not do: finalization clears module globals."""
    import ctypes

    ctypes.pythonapi.Py_IncRef(ctypes.py_object(transport))


def release_all_at_exit(wait_s: float = EXIT_WAIT_S) -> None:
    groups = [g for g in list(_live) if g._transport_open()]
    if not groups:
        return
    done = threading.Event()

    def release() -> None:
        for group in groups:
            group.shutdown()
        done.set()

    # A helper thread, so that a collective stuck in flight cannot hang the exit.
    try:
        threading.Thread(target=release, name="neuron-transport-release", daemon=True).start()
    except RuntimeError:  # an interpreter that refuses new threads this late
        release()
    if not done.wait(wait_s):
        import warnings

        warnings.warn(f"torch_neuronx: a collective was still in flight {wait_s:.0f} s into interpreter exit; "
                      "its process group's transport threads were left running.", RuntimeWarning, stacklevel=1)
