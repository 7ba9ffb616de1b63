"""The program compiled for neuron is Inductor's CPU program: the same fused C++
kernels and extern calls, only buffers are allocated on the neuron core. This is
what makes compiled neuron perform like Inductor on CPU (benchmarks measure it)."""
import re

import torch
import torch.nn.functional as F
from torch._inductor.utils import run_and_get_code


class TinyDecoder(torch.nn.Module):
    def __init__(self, hidden=64, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(hidden, 3 * hidden, bias=False)
        self.o = torch.nn.Linear(hidden, hidden, bias=False)
        self.up = torch.nn.Linear(hidden, 2 * hidden, bias=False)
        self.down = torch.nn.Linear(2 * hidden, hidden, bias=False)

    def forward(self, x):
        b, t, h = x.shape
        n = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        q, k, v = self.qkv(n).view(b, t, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, h)
        x = x + self.o(a)
        return x + self.down(F.silu(self.up(x)))


HOST_PROGRAM_LINES = ("empty_strided_neuron = __import__('torch_neuronx')._C._empty_strided_host",
                      "call = __import__('torch_neuronx')._C._host_program(call, ")


def _program(code: str) -> list[str]:
    """The call sequence of a generated wrapper, with allocations normalised and the host-program
    footer (compiler/_host_program.py: which allocation function and which `call`) left out."""
    body = code[code.index("def call("):code.index("def benchmark_compiled_module")]
    body = "\n".join(line for line in body.splitlines() if not line.startswith(HOST_PROGRAM_LINES))
    body = re.sub(r"empty_strided_(cpu|neuron)\((.*?), torch\.(\w+)(, \d+)?\)", r"ALLOC(\2, \3)", body)
    body = re.sub(r"device='neuron:\d+'|device='cpu'|device\(type='(cpu|neuron)'(, index=\d+)?\)", "DEV", body)
    return [line.strip() for line in body.splitlines() if line.strip() and not line.strip().startswith("#")]


def test_neuron_program_equals_inductor_cpu_program():
    torch.manual_seed(0)
    model = TinyDecoder().eval()
    twin = TinyDecoder().eval()
    twin.load_state_dict(model.state_dict())
    twin.neuron()
    x = torch.randn(2, 16, 64)
    with torch.no_grad():
        ref, cpu_code = run_and_get_code(torch.compile(model, backend="inductor", dynamic=False), x)
        out, neuron_code = run_and_get_code(torch.compile(twin, backend="neuron", dynamic=False), x.neuron())
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)
    cpu_program, neuron_program = _program(cpu_code[0]), _program(neuron_code[0])
    assert any("extern_kernels.mm" in line for line in neuron_program)
    assert any("cpp_fused" in line for line in neuron_program)
    assert neuron_program == cpu_program
    # ...and it runs as a host program: the same extern calls on host views of the core's memory
    footer = [line for line in neuron_code[0].splitlines() if line.startswith(HOST_PROGRAM_LINES)]
    assert footer == [HOST_PROGRAM_LINES[0], HOST_PROGRAM_LINES[1] + "0, (True,))"]
