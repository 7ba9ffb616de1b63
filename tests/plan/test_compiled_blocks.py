"""Blocks compiled in place with fullgraph=True (`nn.Module.compile`, as diffusers'
`compile_repeated_blocks` does) plan in a dry run, more than Dynamo's recompile limit of them: the
estimate's module tracker hooks run eagerly around each compiled block and are not compiled
themselves (estimate/_api.py; the full-size Qwen-Image plan's 9th block failed with
FailOnRecompileLimitHit)."""
from __future__ import annotations

import torch

from torch_neuronx import plan


def test_more_blocks_than_the_recompile_limit_compiled_in_place_plan():
    torch._dynamo.reset()
    torch.manual_seed(0)
    blocks = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(torch._dynamo.config.recompile_limit + 2))
    blocks.to("neuron")
    for block in blocks:
        block.compile(backend="neuron", fullgraph=True, dynamic=False)
    x = torch.randn(4, 16, device="neuron")
    with torch.no_grad(), plan.dry_run() as run:
        for block in blocks:
            x = block(x)
    torch._dynamo.reset()
    assert x.shape == (4, 16)
    assert run.report()["compiled"]["graph_breaks"] == 0
    assert run.report()["compiled"]["graph_break_reasons"] == {}


def test_the_report_names_why_a_compiled_function_broke_into_graphs():
    torch._dynamo.reset()

    def two_halves(x):
        x = x.relu()
        torch._dynamo.graph_break()
        return x + 1

    fn = torch.compile(two_halves, backend="neuron")
    with plan.dry_run() as run:
        fn(torch.ones(8, device="neuron"))
    torch._dynamo.reset()
    comp = run.report()["compiled"]
    assert comp["graph_breaks"] == sum(comp["graph_break_reasons"].values()) >= 1
    text = run.markdown()
    # one markdown line per reason: Dynamo's first line (what broke), then its explanation
    assert any(f"graph break (1x): {reason.splitlines()[0]}; Explanation:" in text
               for reason in comp["graph_break_reasons"]), text
