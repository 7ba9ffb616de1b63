"""torch_neuronx.get_executed_ops / get_fallback_ops / clear_op_tracking."""
import torch

import torch_neuronx
from torch_neuronx.tools.op_tracking import is_neuron_op


def test_counts_per_op_and_clear():
    a = torch.ones(4, 4, device="neuron")
    torch_neuronx.clear_op_tracking()
    assert torch_neuronx.get_executed_ops() == {}
    for _ in range(3):
        b = a + a          # boxed host fallback
    c = a @ a              # explicit matmul kernel
    ops = torch_neuronx.get_executed_ops()
    assert ops["aten::add.Tensor"] == 3
    assert ops["aten::mm"] == 1
    assert torch.equal(b.cpu(), torch.full((4, 4), 2.0)) and torch.equal(c.cpu(), torch.full((4, 4), 4.0))
    torch_neuronx.clear_op_tracking()
    assert "aten::add.Tensor" not in torch_neuronx.get_executed_ops()


def test_fallback_ops_are_executed_ops_outside_the_neuron_op_set():
    a = torch.ones(8, device="neuron")
    torch_neuronx.clear_op_tracking()
    a.add_(1)                                   # in-place variant of a Core ATen op
    torch.linalg.inv(torch.eye(3, device="neuron"))  # not Core ATen: a CPU fallback on Trainium
    fallback = torch_neuronx.get_fallback_ops()
    executed = torch_neuronx.get_executed_ops()
    assert "aten::add_.Tensor" in executed and "aten::add_.Tensor" not in fallback
    assert fallback["aten::linalg_inv_ex"] == 1
    assert set(fallback) <= set(executed)
    assert is_neuron_op("aten::mm") and is_neuron_op("aten::add.out") and not is_neuron_op("aten::median")
