"""Repeated blocks marked with `torch.compiler.nested_compile_region` (invoke_subgraph) compile with
backend "neuron": Inductor writes the block once as a subgraph function whose kernel calls and
buffers go through the neuron wrapper (compiler/_registration.py; the stock subgraph wrapper raised
"device neuron nyi"), in a real run and in a dry run."""
from __future__ import annotations

import torch
from torch._inductor.utils import run_and_get_code

from torch_neuronx import plan


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(32, 32)

    @torch.compiler.nested_compile_region
    def forward(self, x):
        return x + torch.relu(self.lin(x)) * 0.5


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(Block(), Block(), Block()).to("neuron").eval()


def test_a_nested_compile_region_compiles_once_and_equals_cpu():
    model, x = _model(), torch.randn(4, 32, device="neuron")
    torch._dynamo.reset()
    with torch.no_grad():
        out, codes = run_and_get_code(torch.compile(model, backend="neuron"), x)
        expected = _model().cpu()(x.cpu())
    torch._dynamo.reset()
    assert len(codes) == 1
    # one subgraph function for the three blocks, called three times by the main program
    assert codes[0].count("def repeated_subgraph0(") == 1, codes[0][-3000:]
    assert codes[0].count("= repeated_subgraph0(repeated_subgraph0_args)") == 3, codes[0][-3000:]
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-5, atol=1e-6)


def test_a_nested_compile_region_compiles_in_a_dry_run():
    model, x = _model(), torch.randn(4, 32, device="neuron")
    torch._dynamo.reset()
    with torch.no_grad(), plan.dry_run() as run:
        out, codes = run_and_get_code(torch.compile(model, backend="neuron"), x)
    torch._dynamo.reset()
    assert out.shape == (4, 32) and out.device.type == "neuron"
    assert codes[0].count("def repeated_subgraph0(") == 1
    assert run.report()["compiled"]["graphs_compiled"] == 1
