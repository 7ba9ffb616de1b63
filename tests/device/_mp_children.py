"""Targets of the spawned children in test_multiprocessing_strides (spawn needs importable functions)."""
from __future__ import annotations


def describe(t) -> tuple:
    return (str(t.device), tuple(t.shape), tuple(t.stride()), t.is_contiguous(), t.cpu().tolist(),
            t.requires_grad, type(t).__name__)


def forward_received(q_in, q_on, q_report):
    """Second process: report what arrived, then send the received tensors on, unchanged."""
    tensors = q_in.get(timeout=120)
    q_report.put(("second", [describe(t) for t in tensors]))
    q_on.put(tensors)
    q_report.put(("second done", None))


def report_received(q_on, q_report):
    """Third process: report what arrived from the second one."""
    tensors = q_on.get(timeout=120)
    q_report.put(("third", [describe(t) for t in tensors]))
