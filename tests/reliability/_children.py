"""Targets of the spawned children in test_processes_and_exit (spawn needs importable functions)."""
from __future__ import annotations


def describe_args(queue, t, p):
    queue.put((str(t.device), t.tolist(), type(p).__name__, p.requires_grad, str(p.device)))


def echo_doubled(q_in, q_out):
    t = q_in.get(timeout=60)
    q_out.put((str(t.device), t.tolist(), (t * 2).cpu().tolist()))
