"""Stop daemon threads that run neuron work before the interpreter finalizes.

CPython 3.11-3.13 ends a daemon thread that takes the GIL after finalization
has begun with `pthread_exit`. A thread inside a torch call has released the
GIL and takes it back on the way out, inside a C++ destructor; the forced
unwind cannot pass that (noexcept) frame and libstdc++ aborts the process:
"terminate called without an active exception" (exit code 134). A daemon
thread training in a loop while the main thread calls `sys.exit(0)` hits this
every time, on CPU tensors as on neuron ones (PyTorch and CPython behaviour;
CPython 3.14 parks such threads instead).

At exit, while the interpreter is still fully alive, every daemon thread that
ran neuron work (the C++ core records each thread on its first neuron device
check) gets `SystemExit` raised in it: it leaves its torch call normally,
unwinds its Python frames and ends. The exit waits at most `EXIT_WAIT_S` for
them; a thread that swallows SystemExit, or is still inside one long call,
is left as before. Other daemon threads are not touched.
"""
from __future__ import annotations

import ctypes
import threading
import time

EXIT_WAIT_S = 3.0


def neuron_daemon_threads() -> list[threading.Thread]:
    """Alive daemon threads (other than this one) that ran neuron work."""
    from .. import _C

    ids = set(_C._neuron_thread_ids())
    me = threading.current_thread()
    return [t for t in threading.enumerate()
            if t.daemon and t is not me and t.is_alive() and t.native_id in ids]


def stop_neuron_daemon_threads(wait_s: float = EXIT_WAIT_S) -> None:
    """atexit hook, run before the autograd drain (registered after it)."""
    threads = neuron_daemon_threads()
    for t in threads:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(t.ident), ctypes.py_object(SystemExit))
    deadline = time.monotonic() + wait_s
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
