"""A cost a user registers for their own op (estimate/_costs.py): three lines, the estimate uses it,
and a bad registration or formula says what is wrong. The docs/estimate.md example runs as written."""
import re
from pathlib import Path

import pytest
import torch

import torch_neuronx
from torch_neuronx.estimate import Cost, Engine, _costs as costs, register_cost

ROOT = Path(__file__).resolve().parents[2]


@torch.library.custom_op("nxcosttest::scale", mutates_args=())
def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x * factor


@scale.register_fake
def _(x, factor):
    return torch.empty_like(x)


@pytest.fixture
def clean_registry():
    before = dict(costs._registry)
    yield
    costs._registry.clear()
    costs._registry.update(before)


def _events(fn):
    with torch_neuronx.estimate(instance="trn2.3xlarge") as est:
        fn()
    return est


def test_a_registered_cost_is_what_the_estimate_charges(clean_registry):
    x = torch.randn(256, 1024, device="neuron")
    with pytest.warns(RuntimeWarning, match="no cost model for nxcosttest.scale.*register_cost"):
        unregistered = _events(lambda: scale(x, 2.0))
    assert "nxcosttest.scale" in unregistered.unmodelled       # no model until one is registered

    @register_cost(torch.ops.nxcosttest.scale)
    def _(x, factor, *, out_val=None):
        return Cost(elements=3 * x.numel())

    est = _events(lambda: scale(x, 2.0))
    (ev,) = [e for e in est.events if e.name == "nxcosttest.scale"]
    assert "nxcosttest.scale" not in est.unmodelled and ev.category == "elementwise"
    hw = torch_neuronx.estimate.hardware("trn2.3xlarge")
    compute = 3 * x.numel() / (hw.vector_elems_per_s("float32", 1) * hw.assumptions.vector_efficiency)
    memory = 2 * x.numel() * 4 / (hw.hbm_bytes_per_s * hw.assumptions.hbm_efficiency)   # x read, result written
    assert ev.seconds == pytest.approx(max(compute, memory) + ev.launch_s, rel=1e-9)
    assert ev.bytes == 2 * x.numel() * 4 and ev.flops == 0


def test_flops_and_bytes_and_an_aten_override(clean_registry):
    a, b = torch.randn(64, 128, device="neuron"), torch.randn(128, 32, device="neuron")
    base = torch_neuronx.estimate.op_estimate(torch.ops.aten.mm.default, (a, b), {}, a @ b)

    @register_cost(torch.ops.aten.mm.default)
    def _(a, b, *, out_val=None):
        return Cost(flops=4 * a.shape[0] * a.shape[1] * b.shape[1], bytes=0, category="my matmul")

    est = torch_neuronx.estimate.op_estimate(torch.ops.aten.mm.default, (a, b), {}, a @ b)
    assert (est.flops, est.bytes, est.category, est.engine) == (2 * base.flops, 0, "my matmul", "tensor")
    costs.unregister_cost(torch.ops.aten.mm.default)
    assert torch_neuronx.estimate.op_estimate(torch.ops.aten.mm.default, (a, b), {}, a @ b) == base


def test_bad_registrations_raise_clear_errors(clean_registry):
    ok = lambda x, factor, *, out_val=None: Cost(elements=1)   # noqa: E731
    with pytest.raises(ValueError, match="expected each target to be an op.*its name 'mylib::foo'.*got 'scale'"):
        register_cost("scale")(ok)
    with pytest.raises(ValueError, match="expected each target to be an op"):
        register_cost(torch.add)(ok)
    with pytest.raises(TypeError, match="must accept the result as the keyword out_val"):
        register_cost(torch.ops.nxcosttest.scale)(lambda x, factor: Cost())
    with pytest.raises(TypeError, match="decorate a function"):
        register_cost(torch.ops.nxcosttest.scale)(Cost())
    register_cost(torch.ops.nxcosttest.scale)(ok)
    with pytest.raises(RuntimeError, match="duplicate cost registration for nxcosttest.scale; pass replace=True"):
        register_cost(torch.ops.nxcosttest.scale)(ok)
    register_cost(torch.ops.nxcosttest.scale, replace=True)(lambda x, factor, *, out_val=None: "fast")
    x = torch.randn(8, device="neuron")
    # an estimate observes and never stops the program: the formula's error is the op's warning
    with pytest.warns(RuntimeWarning, match=r"returned 'fast'; return torch_neuronx.estimate.Cost"):
        est = _events(lambda: scale(x, 2.0))
    assert "nxcosttest.scale" in est.unmodelled
    with pytest.raises(TypeError, match=r"returned 'fast'; return torch_neuronx.estimate.Cost"):
        costs.registered_cost(torch.ops.nxcosttest.scale.default, (x, 2.0), {}, x)
    with pytest.raises(TypeError, match=r"the second argument is an Engine"):
        register_cost(torch.ops.nxcosttest.scale, "vector")
    with pytest.raises(ValueError, match=r"Engine\(engine='gpu'\): choose one of"):
        Engine("gpu", "elementwise")
    with pytest.raises(ValueError, match=r"Engine\(passes=0\)"):
        Engine("vector", "reduction", passes=0)
    with pytest.raises(ValueError, match=r"Cost\(elements=-1\): give a non-negative int"):
        Cost(elements=-1)
    with pytest.raises(ValueError, match=r"Cost\(flops=1.5\)"):
        Cost(flops=1.5)


@torch.library.custom_op("mylib::rms_scale", mutates_args=())
def rms_scale(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


def test_the_docs_example_runs(clean_registry):
    """docs/estimate.md's "add a cost for your op": three lines, run as written, charged as stated."""
    text = (ROOT / "docs" / "estimate.md").read_text()
    block = re.search(r"<!-- register_cost example -->\s*```python\n(.*?)```", text, re.S)
    assert block, "docs/estimate.md lost its register_cost example"
    assert len(block.group(1).strip().splitlines()) == 3
    exec(compile(block.group(1), "docs/estimate.md", "exec"), {"torch": torch, "Cost": Cost, "register_cost": register_cost})
    x = torch.randn(512, 4096, device="neuron")
    with torch_neuronx.estimate(instance="trn2.48xlarge") as est:
        rms_scale(x)
    (ev,) = [e for e in est.events if e.name == "mylib.rms_scale"]
    assert not est.unmodelled
    hw = torch_neuronx.estimate.hardware("trn2.48xlarge")
    compute = 4 * x.numel() / (hw.vector_elems_per_s("float32", 1) * hw.assumptions.vector_efficiency)
    memory = 2 * x.numel() * 4 / (hw.hbm_bytes_per_s * hw.assumptions.hbm_efficiency)
    assert ev.seconds == pytest.approx(max(compute, memory) + ev.launch_s, rel=1e-9)


def test_an_engine_class_is_what_the_estimate_charges(clean_registry):
    """An op registered with an engine class costs its passes over its elements on that engine."""
    x = torch.randn(256, 1024, device="neuron")
    register_cost(torch.ops.nxcosttest.scale, Engine("scalar", "reduction", passes=3))
    hw = torch_neuronx.estimate.hardware("trn2.3xlarge")
    ev = torch_neuronx.estimate.op_estimate(torch.ops.nxcosttest.scale.default, (x, 2.0), {}, x, hardware=hw)
    assert (ev.engine, ev.category, ev.modelled) == ("scalar", "reduction", True)
    compute = 3 * x.numel() / (hw.scalar_elems_per_s("float32") * hw.assumptions.vector_efficiency)
    memory = 2 * x.numel() * 4 / (hw.hbm_bytes_per_s * hw.assumptions.hbm_efficiency)
    assert ev.seconds == pytest.approx(max(compute, memory) + ev.launch_s, rel=1e-9)


def test_a_decomposition_costs_the_ops_it_reaches(clean_registry):
    @register_cost(torch.ops.nxcosttest.scale, decompose=True)
    def _(x, factor):
        return (x @ x.t()) * factor

    x = torch.randn(64, 128, device="neuron")
    est = torch_neuronx.estimate.op_estimate(torch.ops.nxcosttest.scale.default, (x, 2.0), {}, x)
    assert est.modelled and est.engine == "tensor" and est.flops == 2 * 64 * 128 * 64


def test_the_built_in_entries_name_real_ops_once():
    """Every built-in entry names an op PyTorch has (a misspelt name would cost nothing), and the
    registry refuses a second entry for an op (a table listing an op twice fails at import)."""
    import torch.distributed.fsdp  # noqa: F401 - defines the fsdp ops

    missing = [key for key in costs._registry
               if not hasattr(getattr(torch.ops, key.split("::")[0]), key.split("::")[1].split(".")[0])]
    assert not missing, f"built-in cost entries for ops PyTorch does not have: {missing}"
    with pytest.raises(RuntimeError, match="duplicate cost registration for aten.native_dropout"):
        register_cost("aten::native_dropout", Engine("vector", "elementwise", 2))



def test_a_compiled_graph_moves_the_bytes_a_cost_states(clean_registry):
    """Inside a fused program an op whose cost states its bytes (a kernel's own DMA, e.g. one that
    reloads weights per block) moves those, not just the tensors at its boundary."""
    from torch_neuronx.estimate._graphs import estimate_graph

    stated = 7 * 2**20

    @register_cost(torch.ops.nxcosttest.scale)
    def _(x, factor, *, out_val=None):
        return Cost(flops=2 * x.numel(), bytes=stated)

    class Scale(torch.nn.Module):
        def forward(self, x):
            return scale(x, 3.0)

    gm = torch.fx.symbolic_trace(Scale())
    hw = torch_neuronx.estimate.hardware("trn2.3xlarge")
    fwd = estimate_graph(gm, [torch.randn(64, 64)], hw, backward=False)["forward"]
    assert fwd.bytes == stated and fwd.kernels == 1
    assert fwd.memory_s == pytest.approx(stated / (hw.hbm_bytes_per_s * hw.assumptions.hbm_efficiency), rel=1e-12)
