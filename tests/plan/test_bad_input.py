"""What a dry run cannot do stops with a message that names the fix, and allocates nothing."""
from __future__ import annotations

import pytest
import torch

from torch_neuronx import plan
from torch_neuronx.runtime import env


def test_data_dependent_shape_on_a_phantom_tensor_names_the_op_and_line():
    with plan.dry_run():
        big = torch.zeros(512, 1024, device="neuron")
        before = torch.neuron.memory_allocated()
        with pytest.raises(plan.DryRunError, match=r"aten::nonzero \(at .*test_bad_input.py:\d+\).*static"):
            torch.nonzero(big)
        assert torch.neuron.memory_allocated() == before


_lib = torch.library.Library("plan_test", "DEF")
_lib.define("scale(Tensor x) -> Tensor")
for _key in ("CPU", "PrivateUse1"):   # kernels for the devices, but no meta/fake kernel
    _lib.impl("scale", lambda x: x * 2, _key)


def test_op_without_a_meta_kernel_says_how_to_register_one():
    with plan.dry_run():
        big = torch.zeros(512, 1024, device="neuron")
        before = torch.neuron.memory_allocated()
        with pytest.raises(plan.DryRunError, match=r"plan_test::scale .*no meta kernel.*register_fake"):
            torch.ops.plan_test.scale(big)
        assert torch.neuron.memory_allocated() == before
        small = torch.ops.plan_test.scale(torch.ones(4, device="neuron"))   # small: runs for real
        assert small.tolist() == [2.0] * 4


def test_a_loop_waiting_on_a_value_stops_with_the_line(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DRY_RUN_MAX_SYNCS_PER_SITE", "50")
    with plan.dry_run():
        w = torch.zeros(512, 1024, device="neuron")
        with pytest.raises(plan.DryRunError, match=r"test_bad_input.py:\d+ has read device values 51 times"):
            while (w.sum() < 1.0).item():   # never true on placeholders
                w = w + 0.0


def test_enable_after_the_first_allocation_refuses():
    torch.ones(1, device="neuron")
    with pytest.raises(plan.DryRunError, match="TORCH_NEURONX_DRY_RUN=1"):
        plan.enable()


def test_bad_environment_values_name_the_variable(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DRY_RUN", "yes")
    with pytest.raises(env.NeuronEnvironmentError, match="TORCH_NEURONX_DRY_RUN='yes' must be 1"):
        plan._dry_run_env.requested()
    monkeypatch.setenv("TORCH_NEURONX_DRY_RUN_LARGE_BYTES", "lots")
    with pytest.raises(env.NeuronEnvironmentError, match="TORCH_NEURONX_DRY_RUN_LARGE_BYTES"):
        plan.dry_run().__enter__()
