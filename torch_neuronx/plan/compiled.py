"""Compiled graphs in a dry run: Inductor's real program, with its C++ kernels replaced by no-ops.

A graph compiled with `torch.compile(backend="neuron")` inside a dry run goes through the same
Dynamo -> AOTAutograd -> Inductor pipeline as a real run: lowering, fusion, scheduling and the
Python wrapper, whose `empty_strided_neuron(...)`, `del buf` and `reinterpret_tensor(...)` lines
are exactly the buffers the real program allocates, frees and reuses. Only the expensive part is
skipped: the C++ kernels are never compiled; each `async_compile.cpp_pybinding(...)` returns a
no-op with the same arguments. So the allocator charges a compiled graph what the real compiled
program allocates (not the op-by-op intermediates Inductor fuses away), and the peak
`max_memory_allocated` of a dry run equals the real run's (tests/plan/test_exact.py).

Values: a no-op kernel writes nothing, so the buffers it would write read as zeros (the small
ones are zero-filled, as every placeholder of a dry run; large ones stay phantom). Extern kernels
(matmuls, fallback ATen ops) the wrapper calls go through the dry-run dispatch mode as eager ops do.

Why the wrapper source is marked and the on-disk caches are off while compiling: Inductor keeps
loaded wrapper modules by the hash of their source (PyCodeCache), and its FX-graph and AOTAutograd
caches hand back the source of an earlier compile; a real program loaded earlier in the process
must never serve a dry run (its kernels would compute on phantom memory), and a dry-run program
(no-op kernels) must never serve a real run.

Why vectorization is off while compiling (`cpp.simdlen` 1, no vector ISA): for every fused node
Inductor's C++ code generation writes a scalar kernel and then, to vectorize it, picks a tiling
(sympy over every index) and writes vector and tail kernels: 12% of a 512-token prefill graph's
compile CPU time (benchmarks/plan_compile_speed.py; a wall-clock profile had overstated it).
Only the scalar kernel changes what the wrapper allocates (Inductor takes `removed_buffers` and
in-place buffers from it alone and writes the vector kernels with `inplace_buffers` off), and the
no-op kernels never run the rest, so a dry run skips it: the wrapper's `call()` is the real one
(tests/plan/test_compiled_speed.py).
"""
from __future__ import annotations

import contextlib

import torch

from ..compiler.hooks import CompileOverride
from ..estimate.aten_schema import storage_bytes

# Inductor's cpp.simdlen while a dry run compiles: 1 is no vector ISA (see the module docstring)
SIMDLEN = 1

MARKER = "# torch_neuronx dry run: C++ kernels are no-ops (torch_neuronx/plan/compiled.py)"


def _written(argtypes: list[str]) -> list[bool]:
    """Which kernel arguments the C++ kernel writes: its non-const pointers (`float*`, not `const float*`)."""
    return [t.strip().endswith("*") and not t.strip().startswith("const") for t in argtypes]


def no_op_kernel(argtypes: list[str], large_bytes: int):
    """A stand-in for one compiled C++ kernel: zero-fills the small buffers it would write."""
    written = _written(argtypes)

    def kernel(*args):
        from torch.utils._python_dispatch import _disable_current_modes

        with _disable_current_modes():   # not an op of the program: no mode counts it
            for w, a in zip(written, args):
                if w and isinstance(a, torch.Tensor) and 0 < storage_bytes(a) < large_bytes:
                    a.zero_()
        return None

    return kernel


def compile_override(large_bytes: int) -> CompileOverride:
    """What a dry run registers with the compiler (torch_neuronx/compiler/hooks.py) while it is active:
    Inductor's real program with no-op kernels, cached apart from real programs ("dry_run" in the key)."""
    return CompileOverride(key_field="dry_run",
                                 inductor_context=lambda: inductor_without_kernels(large_bytes))


@contextlib.contextmanager
def inductor_without_kernels(large_bytes: int):
    """Inside: Inductor compiles as usual but loads no-op kernels (see the module docstring)."""
    from .._torch_versions import require

    # PythonWrapperCodegen.write_header and AsyncCompile.cpp_pybinding are private Inductor seams:
    # run on 2.13; on 2.14 their signatures were read and are the same
    require("torch_neuronx.plan.compiled.inductor_without_kernels (Inductor's wrapper header and "
            "C++ kernel loader)")
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    from torch._inductor.async_compile import AsyncCompile
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen

    original_header = PythonWrapperCodegen.write_header
    original_cpp = AsyncCompile.cpp_pybinding

    def write_header(self) -> None:
        original_header(self)
        self.header.writeline(MARKER)   # a different source: never the same PyCodeCache module

    def cpp_pybinding(self, argtypes, source_code):
        return no_op_kernel(list(argtypes), large_bytes)

    PythonWrapperCodegen.write_header = write_header
    AsyncCompile.cpp_pybinding = cpp_pybinding
    try:
        with inductor_config.patch({"fx_graph_cache": False, "cpp.simdlen": SIMDLEN}), \
                functorch_config.patch(enable_autograd_cache=False, force_non_lazy_backward_lowering=True):
            yield
    finally:
        PythonWrapperCodegen.write_header = original_header
        AsyncCompile.cpp_pybinding = original_cpp
