"""Processes and threads: neuron tensors through torch.multiprocessing (queue
and spawn arguments) arrive with their values and device; a forked child that
uses the device gets the spawn advice; threads on different cores agree with
CPU; a daemon thread training on neuron:1 when the main thread exits does not
abort the process (the mechanism is tested directly: the exit hook stops that
thread before finalization, and leaves other daemon threads alone)."""
from __future__ import annotations

import re

from tests.reliability.hostile import passed, raised, run_cases


def test_queue_spawn_and_fork():
    results = run_cases("""
        import os, torch, torch.multiprocessing as mp
        from tests.reliability._children import describe_args, echo_doubled

        ctx = mp.get_context("spawn")
        t = torch.arange(4.0, device="neuron:2")
        p = torch.nn.Parameter(torch.ones(2, device="neuron:1"))
        with case("spawn arguments arrive"):
            q = ctx.Queue()
            proc = ctx.Process(target=describe_args, args=(q, t, p)); proc.start()
            got = q.get(timeout=90); proc.join(60)
            assert got == ("neuron:2", [0.0, 1.0, 2.0, 3.0], "Parameter", True, "neuron:1"), got
            assert proc.exitcode == 0, proc.exitcode
        with case("queue arrives"):
            q_in, q_out = ctx.Queue(), ctx.Queue()
            proc = ctx.Process(target=echo_doubled, args=(q_in, q_out)); proc.start()
            q_in.put(t[1:])
            got = q_out.get(timeout=90); proc.join(60)
            assert got == ("neuron:2", [1.0, 2.0, 3.0], [2.0, 4.0, 6.0]), got
        with case("non-leaf requiring grad refused as torch does"):
            x = torch.ones(2, device="neuron", requires_grad=True) * 2
            ctx.Process(target=describe_args, args=(ctx.Queue(), x, p)).start()
        with case("forked child after use"):
            pid = os.fork()
            if pid == 0:
                try:
                    torch.ones(1, device="neuron")
                    os._exit(3)
                except RuntimeError as err:
                    os._exit(0 if "spawn" in str(err) else 4)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0, os.waitstatus_to_exitcode(status)
    """, timeout=300)
    passed(results, "spawn arguments arrive")
    passed(results, "queue arrives")
    raised(results, "non-leaf requiring grad refused as torch does", "RuntimeError", "detach()")
    passed(results, "forked child after use")


def test_threads_on_different_cores_match_cpu():
    results = run_cases("""
        import threading, torch
        torch.manual_seed(0)
        ref = torch.nn.Linear(8, 8)
        x = torch.randn(4, 8)
        expected = torch.autograd.grad(ref(x).sum(), ref.weight)[0]
        out = {}
        def work(i):
            m = torch.nn.Linear(8, 8).to(f"neuron:{i}")
            m.load_state_dict(ref.state_dict())
            for _ in range(20):
                g = torch.autograd.grad(m(x.to(f"neuron:{i}")).sum(), m.weight)[0]
            out[i] = (g.device.index, torch.allclose(g.cpu(), expected))
        with case("four threads, four cores"):
            threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
            [t.start() for t in threads]; [t.join(60) for t in threads]
            assert out == {i: (i, True) for i in range(4)}, out
    """)
    passed(results, "four threads, four cores")


DAEMON_TRAINING = """
import atexit, sys, threading, time, torch

trained = threading.Event()   # set once the thread has run neuron work: what makes it a target

def train():
    m = torch.nn.Linear(16, 16).to("neuron:1")
    x = torch.randn(8, 16, device="neuron:1")
    while True:
        m(x).sum().backward()
        trained.set()

def idle():
    time.sleep(3600)
"""


def test_exit_hook_stops_neuron_daemon_threads_before_finalization():
    # A daemon thread training on neuron:1 while the main thread exits: CPython 3.11
    # ends it with pthread_exit when it takes the GIL back inside a torch call after
    # finalization began, and libstdc++ aborted the process every time (exit 134).
    # The child must now exit 0 (run_cases checks), and the mechanism is checked
    # directly: a handler registered before torch's runs after the exit hook; by
    # then the training thread is gone, the idle (non-neuron) one is untouched,
    # and the wait was not spent on it.
    results = run_cases("""
import atexit, threading, time
state = {}

def after_exit_hook():
    state["train alive"] = state["train"].is_alive()
    state["idle alive"] = state["idle"].is_alive()
    state["wait s"] = time.monotonic() - state["exit at"]
    print("STATE", state["train alive"], state["idle alive"], round(state["wait s"], 1), flush=True)

atexit.register(after_exit_hook)
""" + DAEMON_TRAINING + """
state["train"] = threading.Thread(target=train, daemon=True)
state["idle"] = threading.Thread(target=idle, daemon=True)
state["train"].start(); state["idle"].start()
assert trained.wait(600), "the training thread never ran a step"   # no fixed sleep: load can slow its start
from torch_neuronx.runtime import _exit_guard as exit_guard
with case("only the neuron thread is a target"):
    assert exit_guard.neuron_daemon_threads() == [state["train"]], exit_guard.neuron_daemon_threads()
state["exit at"] = time.monotonic()
""", timeout=240)
    passed(results, "only the neuron thread is a target")
    match = re.search(r"STATE (\w+) (\w+) ([\d.]+)", results["_stdout"]["message"])
    assert match is not None, results["_stdout"]["message"]
    assert match.group(1) == "False", "the training thread was still alive at finalization"
    assert match.group(2) == "True", "a daemon thread that never ran neuron work was stopped"
    assert float(match.group(3)) < exit_wait_s(), "the exit waited on the idle thread"


def exit_wait_s() -> float:
    from torch_neuronx.runtime import _exit_guard as exit_guard

    return exit_guard.EXIT_WAIT_S
