"""The ATen schema and storage helpers (estimate/aten_schema.py) that the cost model, the dry-run planner
and the numerics emulation share, on real ops and tensors."""
import torch

from torch_neuronx.estimate import aten_schema as helpers

aten = torch.ops.aten


def test_storage_bytes_counts_the_whole_base_of_a_view():
    base = torch.empty(1024, dtype=torch.float32, device="neuron")
    assert helpers.storage_bytes(base) == 4096
    assert helpers.storage_bytes(base[::4][:10]) == 4096        # a view holds its base's storage
    assert helpers.storage_bytes(torch.empty(0, device="neuron")) == 0


def test_is_view_reads_the_alias_annotations():
    for op in (aten.view.default, aten.transpose.int, aten.split.Tensor, aten.detach.default,
               aten.expand.default, aten.alias.default):
        assert helpers.is_view(op), op
    for op in (aten.add.Tensor, aten.add_.Tensor, aten.add.out, aten.clone.default, aten.mm.default,
               aten.transpose_.default):                            # in place: writes its input
        assert not helpers.is_view(op), op
    # agrees with PyTorch's own reading of the schema on every ATen op a tensor program can run
    for op in (aten.view.default, aten.add_.Tensor, aten.mm.out, aten.unbind.int, aten.as_strided.default):
        assert helpers.is_view(op) == op.is_view, op


def test_written_arguments_and_tensors():
    assert helpers.written_arguments(aten.add_.Tensor) == ([0], [])
    assert helpers.written_arguments(aten.add.out) == ([], ["out"])
    assert helpers.written_arguments(aten.add.Tensor) == ([], [])
    x, y, out = (torch.ones(3, device="neuron") for _ in range(3))
    assert helpers.written_tensors(aten.add.out, (x, y), {"out": out}) == [out]
    assert helpers.written_tensors(aten.add_.Tensor, (x, y), {}) == [x]
    assert helpers.written_tensors(aten._foreach_add_.Scalar, ([x, y], 1.0), {}) == [x, y]


def test_one_copy_for_the_planner_numerics_and_the_cost_model():
    from torch_neuronx.estimate import _formulas as formulas
    from torch_neuronx.numerics import dispatch_mode, recompute
    from torch_neuronx.plan import _mode as mode
    from torch_neuronx.plan.distributed import _memory as memory

    assert mode.is_view is helpers.is_view and dispatch_mode.is_view is helpers.is_view
    assert mode.storage_bytes is helpers.storage_bytes is memory.storage_bytes
    assert mode.written_tensors is helpers.written_tensors and recompute.written_arguments is helpers.written_arguments
    assert formulas.is_view(aten.view.default) and formulas.is_view(aten.t.default)
    assert not formulas.is_view(aten.mm.default)
