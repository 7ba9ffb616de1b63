"""Compiled graphs are estimated as fused programs (one launch per graph, traffic at fusion
boundaries): a transformer layer comes out faster than the same layer eager, for the reasons the
report gives; the neuron backend's compiled graphs are recorded as one event per launch."""
import torch
import torch.nn as nn

import torch_neuronx
from torch_neuronx.estimate import hardware
from torch_neuronx.estimate._graphs import estimate_graph, observe
from tests.estimate.test_eager import Block, _step


def test_transformer_layer_fused_program_beats_eager():
    torch.manual_seed(0)
    model = Block(d=64, h=4).to("neuron")
    gm = torch.fx.symbolic_trace(model)
    x = torch.randn(2, 64, 64, device="neuron")
    params = list(model.parameters())
    ests = estimate_graph(gm, [x], hardware("trn2.3xlarge"), "layer")
    assert set(ests) == {"forward", "backward"}
    assert all(p.grad is None for p in params)          # the trace ran on fake tensors only
    for g in ests.values():
        assert g.kernels < g.ops and g.eager_launches == g.ops
        assert g.bytes < g.eager_bytes and g.seconds < g.eager_seconds
        assert "fused into" in g.explain()
    with torch_neuronx.estimate("trn2.3xlarge") as eager:
        _step(model, x)
    assert sum(g.flops for g in ests.values()) == eager.flops
    assert sum(g.seconds for g in ests.values()) < eager.total_s


def test_compiled_graph_recorded_once_per_call_with_same_results():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU()).to("neuron")
    compiled = torch.compile(model, backend="neuron")
    x = torch.randn(4, 32, device="neuron")
    with torch.no_grad():                       # one forward graph: keeps the compile short
        ref = compiled(x).cpu()                 # compile outside the estimate
        with torch_neuronx.estimate() as est:
            y = compiled(x)
            compiled(x)
    assert torch.equal(y.cpu(), ref)
    graphs = [e for e in est.events if e.kind == "graph"]
    assert len(graphs) == 2 and not [e for e in est.events if e.kind == "op"]   # extern mm not recounted
    assert graphs[0].detail["launches"] == 1 and graphs[0].flops == 2 * 4 * 32 * 64
    assert "compiled" in est.summary()


def test_backward_of_a_graph_counts_as_one_program_when_autograd_runs_it():
    """The hook the backend installs, around an autograd-recording callable (Inductor's compiled
    function behaves the same way: one autograd node whose backward runs the backward graph)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU()).to("neuron")
    gm = torch.fx.symbolic_trace(model)
    w = model[0].weight

    class OneNode(torch.autograd.Function):
        """Forward and backward each in one autograd node, as AOTAutograd's compiled function."""
        @staticmethod
        def forward(ctx, x, weight):
            ctx.save_for_backward(x)
            return model(x)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            with torch.enable_grad():
                out = model(x)
                (gw,) = torch.autograd.grad(out, [w], grad)
            return None, gw

    run = observe(gm, lambda x: OneNode.apply(x, w), "mlp")
    x = torch.randn(4, 32, device="neuron")
    ref = model(x)
    ref.sum().backward()
    ref_grad = model[0].weight.grad.clone()
    model.zero_grad(set_to_none=True)
    with torch_neuronx.estimate() as est:
        y = run(x)
        y.sum().backward()
    assert torch.equal(y.cpu(), ref.cpu()) and torch.equal(model[0].weight.grad.cpu(), ref_grad.cpu())
    graphs = [e for e in est.events if e.kind == "graph"]
    assert [(g.name, g.phase) for g in graphs] == [("mlp:forward", "forward"), ("mlp:backward", "backward")]
    assert graphs[1].flops == 2 * 4 * 32 * 64                # the weight gradient's matmul
    ops = {e.name for e in est.events if e.kind == "op"}
    assert not ops & {"aten.mm", "aten.addmm", "aten.gelu", "aten.gelu_backward"}, ops
    assert ops == {"aten.sum", "aten.ones_like"}            # only what ran outside the graphs
