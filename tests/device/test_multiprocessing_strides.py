"""torch.multiprocessing with neuron tensors, as PyTorch's PrivateUse1 reference tests ask of a backend:
a strided (non-contiguous) tensor arrives with its strides and values, and a tensor received that way
can itself be sent on to a third process, as CPU tensors can."""
from __future__ import annotations

import torch
import torch.multiprocessing as mp

from tests.device._mp_children import describe, forward_received, report_received


def _tensors() -> list:
    base = torch.arange(24.0, device="neuron:1").reshape(4, 6)
    return [
        base.t(),                                                # transposed: strides (1, 6)
        base[1:, ::2],                                           # sliced with a step and an offset
        torch.arange(3, device="neuron:1").expand(4, 3),         # stride 0
        base[:, 2],                                              # a column: stride (6,)
        torch.empty(0, 5, device="neuron:1"),                    # empty
        torch.nn.Parameter(torch.ones(3, 2, device="neuron:1").t()),  # a strided Parameter
    ]


def test_strided_tensor_arrives_with_its_strides_and_can_be_sent_on():
    sent = _tensors()
    expected = [describe(t) for t in sent]
    assert not expected[0][3] and expected[0][2] == (1, 6)  # the cases really are strided
    ctx = mp.get_context("spawn")
    q_in, q_on, q_report = ctx.Queue(), ctx.Queue(), ctx.Queue()
    second = ctx.Process(target=forward_received, args=(q_in, q_on, q_report))
    third = ctx.Process(target=report_received, args=(q_on, q_report))
    second.start()
    third.start()
    try:
        q_in.put(sent)
        reports = dict(q_report.get(timeout=240) for _ in range(3))
    finally:
        second.join(60)
        third.join(60)
    assert second.exitcode == 0 and third.exitcode == 0, (second.exitcode, third.exitcode)
    assert reports["second"] == expected
    assert reports["third"] == expected
