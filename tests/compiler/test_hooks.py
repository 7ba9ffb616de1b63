"""The compiler's hooks (torch_neuronx/compiler/hooks.py): what the layers above register at startup,
and what each hook changes in a real compile, checked against CPU results."""
from __future__ import annotations

import ast
import contextlib
import re
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from torch_neuronx import numerics
from torch_neuronx.compiler import _cache as cache, hooks, _host_program as host_program

from .conftest import elementwise, neuron_randn

ROOT = Path(__file__).resolve().parents[2]


def test_startup_registers_the_higher_layers():
    """`import torch_neuronx` alone fills the hooks: the numerics settings are in every cache key
    and compiled graphs are observed (estimate, neuron-top), without importing those layers first."""
    assert "numerics" in hooks.cache_key_fields.names()
    assert "numerics" in hooks.op_by_op.names()
    assert "estimate" in hooks.graph_observers.names()
    assert numerics.key_fields() in hooks.key_fields()
    assert hooks.compile_overrides.active() is None   # no dry run here
    assert torch.neuron._inductor_registration   # torch.neuron can register the compiler for Inductor


def _key_of(fn, *args, fields=()):
    gm = torch.fx.symbolic_trace(fn)
    return cache.graph_key(gm, list(args), fields)


def test_cache_key_fields_change_the_key_and_registering_twice_keeps_it():
    x, y = neuron_randn(4, 4), neuron_randn(4, 4, seed=1)
    before = _key_of(elementwise, x, y)
    setting = {"value": ("a",)}
    hooks.cache_key_fields.register("test setting", lambda: setting["value"])
    try:
        with_a = _key_of(elementwise, x, y)
        hooks.cache_key_fields.register("test setting", lambda: setting["value"])   # installs twice
        assert _key_of(elementwise, x, y) == with_a
        setting["value"] = ("b",)
        assert _key_of(elementwise, x, y) not in (with_a, before)
    finally:
        hooks.cache_key_fields.unregister("test setting")
    assert _key_of(elementwise, x, y) == before


class _SeenOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True   # Dynamo runs the compiled graph under the mode (as the strict op check's)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func._schema.name)
        return func(*args, **(kwargs or {}))


def _ops_of_compiled_call(x, y):
    """The ATen ops a dispatch mode entered before compiling (as the strict op check's is) sees
    in the second call of the compiled function."""
    torch._dynamo.reset()
    with _SeenOps() as seen:
        compiled = torch.compile(elementwise, backend="neuron", dynamic=False)
        compiled(x, y)
        seen.ops.clear()
        out = compiled(x, y)
    return out, seen.ops


def test_op_by_op_runs_each_op_of_a_compiled_graph_through_dispatch():
    x, y = neuron_randn(8, 8), neuron_randn(8, 8, seed=1)
    expected = elementwise(x.cpu(), y.cpu())
    fused, fused_ops = _ops_of_compiled_call(x, y)
    assert "aten::sin" not in fused_ops   # Inductor's C++ kernel: no ATen op to see
    hooks.op_by_op.register("test op by op", lambda: True)
    hooks.cache_key_fields.register("test op by op", lambda: ("op by op",))   # else the fused program is a hit
    try:
        out, ops = _ops_of_compiled_call(x, y)
    finally:
        hooks.op_by_op.unregister("test op by op")
        hooks.cache_key_fields.unregister("test op by op")
    assert {"aten::relu", "aten::mul", "aten::sin", "aten::add"} <= set(ops)
    torch.testing.assert_close(out.cpu(), expected)
    torch.testing.assert_close(fused.cpu(), expected)


def test_a_compile_override_wraps_inductor_keys_apart_and_keeps_host_programs_off():
    x, y = neuron_randn(8, 8), neuron_randn(8, 8, seed=1)
    entered = []

    @contextlib.contextmanager
    def around_inductor():
        entered.append(True)
        yield

    keys = []
    real_key = cache.graph_key

    def recording_key(gm, example_inputs, fields=()):
        keys.append(fields)
        return real_key(gm, example_inputs, fields)

    cache.graph_key = recording_key
    token = hooks.compile_overrides.push(hooks.CompileOverride("test override", around_inductor))
    try:
        assert host_program.plan(None, "") is None   # no host program while the override applies
        torch._dynamo.reset()
        out = torch.compile(elementwise, backend="neuron", dynamic=False)(x, y)
    finally:
        hooks.compile_overrides.remove(token)
        cache.graph_key = real_key
    assert entered == [True]
    # the compile's key carries the override's field; the compile log's key (the graph itself, what a
    # warm cache of real programs is looked up by) is computed after it, without the field
    assert len(keys) == 2 and keys[0][-1] == "test override" and "test override" not in keys[1]
    torch.testing.assert_close(out.cpu(), elementwise(x.cpu(), y.cpu()))
    assert hooks.compile_overrides.active() is None


def test_a_dry_run_overrides_compiles_while_it_is_active():
    from torch_neuronx import plan

    with plan.dry_run() as outer:
        override = hooks.compile_overrides.active()
        assert override is not None and override.key_field == "dry_run"
        with plan.dry_run():
            assert hooks.compile_overrides.active() is not override   # the inner dry run's
        assert hooks.compile_overrides.active() is override
    assert outer.report() and hooks.compile_overrides.active() is None


def test_overrides_nest_innermost_first():
    outer = hooks.CompileOverride("outer", contextlib.nullcontext)
    inner = hooks.CompileOverride("inner", contextlib.nullcontext)
    a = hooks.compile_overrides.push(outer)
    b = hooks.compile_overrides.push(inner)
    try:
        assert hooks.compile_overrides.active() is inner
        hooks.compile_overrides.remove(b)
        assert hooks.compile_overrides.active() is outer
    finally:
        hooks.compile_overrides.remove(a)
        hooks.compile_overrides.remove(b)
    assert hooks.compile_overrides.active() is None


def test_graph_observers_wrap_each_compiled_graph():
    calls = []

    def observer(gm, compiled, name):
        def run(*args):
            calls.append(name)
            return compiled(*args)
        return run

    x, y = neuron_randn(8, 8), neuron_randn(8, 8, seed=1)
    hooks.graph_observers.register("test observer", observer)
    try:
        torch._dynamo.reset()
        compiled = torch.compile(elementwise, backend="neuron", dynamic=False)
        out = compiled(x, y)
        compiled(x, y)
    finally:
        hooks.graph_observers.unregister("test observer")
    assert len(calls) == 2 and calls[0] == calls[1]
    torch.testing.assert_close(out.cpu(), elementwise(x.cpu(), y.cpu()))


def test_bad_registrations_name_the_argument():
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        hooks.op_by_op.register("", lambda: True)
    with pytest.raises(TypeError, match="entry must be callable"):
        hooks.cache_key_fields.register("x", ("not", "callable"))
    with pytest.raises(TypeError, match="CompileOverride"):
        hooks.compile_overrides.push("dry_run")
    with pytest.raises(TypeError, match="register must be callable"):
        torch.neuron._set_inductor_registration(None)


def test_compiler_and_device_never_peek_at_higher_layers():
    """No `sys.modules` look-up of a product module in the compiler or the device layer: the
    layer test reads imports only, so a peek would hide an upward dependency from it."""
    peeks = []
    for folder in ("compiler", "neuron"):
        for path in (ROOT / "torch_neuronx" / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                        and re.fullmatch(r"torch_neuronx\.(plan|estimate|numerics|profiling|tools|"
                                         r"integrations|compat|ops_support)[\w.]*", node.value):
                    peeks.append(f"{path.relative_to(ROOT)}: {node.value!r}")
    assert not peeks, "\n".join(peeks)
