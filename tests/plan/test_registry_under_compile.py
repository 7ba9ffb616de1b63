"""The dry run's module registry stays out of compiled graphs.

Dynamo inlines global forward pre-hooks. If the registry's hook were traced, its WeakSet would be
guarded entry by entry, and a module collected between tracing and guard building (an earlier
probe's model, freed by the collector) would break the guards with an IndexError.
"""
import torch

from torch_neuronx.plan._memory import _Registry
from torch_neuronx.plan._steps import StepClock


def test_a_module_collected_while_a_graph_compiles_leaves_its_guards_intact():
    registry = _Registry(StepClock(None))
    registry.install()
    try:
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
        assert len(registry.modules) == 1      # the Linear registered its parameters

        def backend(gm, example_inputs):
            registry.modules.clear()           # what the collector does to an earlier model's modules
            return gm.forward

        x = torch.randn(2, 4)
        out = torch.compile(lambda t: model(t), backend=backend)(x)
        torch.testing.assert_close(out, model(x))
    finally:
        registry.remove()
    torch._dynamo.reset()


def test_an_eager_forward_still_registers_a_module_built_before_the_dry_run():
    model = torch.nn.Linear(4, 4)               # built before the registry existed
    registry = _Registry(StepClock(None))
    registry.install()
    try:
        model(torch.randn(2, 4))
        assert model in registry.modules
        assert any(p is model.weight for p in registry.params())
    finally:
        registry.remove()
