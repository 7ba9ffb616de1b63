"""A dry run's compile skips what only the kernels' speed needs (plan/compiled.py), and its wrapper
stays the real program's: the same `call()` line for line, so the same buffers are allocated,
freed and reused."""
from __future__ import annotations

import torch
from torch._inductor.utils import run_and_get_code

from torch_neuronx import plan
from torch_neuronx.plan import compiled


def _norm_gate(x, w):
    # bf16 RMS norm, matmul and SiLU gate: Inductor vectorizes and tiles its fused kernels
    h = x.float()
    h = (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)).to(torch.bfloat16)
    h = h @ w
    return torch.nn.functional.silu(h) * h + x


def _inputs():
    torch.manual_seed(0)
    return (torch.randn(64, 128, device="neuron", dtype=torch.bfloat16),
            torch.randn(128, 128, device="neuron", dtype=torch.bfloat16))


def _call_body(source: str) -> str:
    """The wrapper's `call(args)`: every buffer it allocates, frees and reuses, and each kernel call."""
    lines = source.splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("def call(")), None)
    assert start is not None, source[-2000:]
    indent = len(lines[start]) - len(lines[start].lstrip())
    body = [lines[start]]
    for line in lines[start + 1:]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line)
    return "\n".join(body)


def _dry_compiled_source() -> str:
    fn = torch.compile(_norm_gate, backend="neuron")
    with plan.dry_run():
        _, codes = run_and_get_code(fn, *_inputs())
    torch._dynamo.reset()
    assert len(codes) == 1, len(codes)
    return codes[0]


def test_dry_compile_writes_scalar_kernels_only_and_the_same_call(monkeypatch):
    # no cached program: each side is compiled here (neither builds C++: both are dry)
    monkeypatch.setenv("NEURON_COMPILATION_CACHE_MAX_ENTRIES", "0")
    dry = _dry_compiled_source()
    monkeypatch.setattr(compiled, "SIMDLEN", None)    # Inductor's default: the real program's ISA
    vectorized = _dry_compiled_source()
    assert "at::vec::" in vectorized      # the real program is vectorized...
    assert "at::vec::" not in dry         # ...the dry one writes no vector or tail kernels
    assert "cpp_fused" in dry
    # the wrapper, which the dry run executes, is unchanged
    assert _call_body(dry) == _call_body(vectorized)
