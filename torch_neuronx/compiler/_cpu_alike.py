"""Make Inductor treat the neuron device like the CPU where it picks CppScheduling paths.

Inductor decides many C++-codegen-specific things with `device.type == "cpu"`.
The virtual NeuronCore runs the same C++ kernels on host memory, so each of the
functions below is recompiled from its own source with every `"cpu"` comparison
widened to `("cpu", "neuron")`, and its `__code__` is swapped in place: every
registry holding the function (lowerings, decompositions, methods) sees the
change without re-registration. The list is pinned to the torch version and a
test fails if a function no longer contains a `"cpu"` comparison.

Left alone on purpose: mkldnn fusions, freezing/prepack, quantisation
lowerings, the constructor mover, pinned memory, cpp_wrapper/AOTInductor.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
import types

from .._torch_versions import minor, require

DEVICE = "neuron"
# The torch minors whose Inductor sources the TARGETS list below was checked against.
WRITTEN_FOR = ("2.13", "2.14", "2.15")

# module -> qualified function names inside it (torch 2.13 and 2.14; 2.15's changes are in _CHANGED)
_TARGETS_213: dict[str, tuple[str, ...]] = {
    "torch._inductor.lowering": ("cat", "_pad_as_cat", "use_two_step_variance", "div_prim"),
    "torch._inductor.kernel.bmm": ("tuned_bmm",),
    "torch._inductor.decomposition": ("bmm", "addmm", "mm"),
    "torch._inductor.scheduler": (
        "BaseSchedulerNode.is_cpu",
        "Scheduler.speedup_by_fusion",
        "ForeachKernelSchedulerNode._default_group_nodes_for_combo_kernels",
    ),
    "torch._inductor.choices": (
        "InductorChoices.get_config_heuristics",
        "InductorChoices.should_use_cooperative_reduction",
    ),
    "torch._inductor.utils": ("get_current_backend", "_use_template_for_cpu", "use_scatter_fallback"),
    "torch._inductor.select_algorithm": ("AlgorithmSelectorCache.__call__",),
    "torch._inductor.codegen.wrapper": ("AllocateLine.plan",),
}

# torch 2.15: the combo-kernel grouping's cpu/mps exclusion moved into a helper of its own, and pooling's
# argmax offsets take CPU's C++ path (a row-major index into the window) in a new helper.
_CHANGED: dict[str, dict[str, tuple[tuple[str, ...], tuple[str, ...]]]] = {   # minor -> module -> (drop, add)
    "2.15": {
        "torch._inductor.scheduler": (("ForeachKernelSchedulerNode._default_group_nodes_for_combo_kernels",),
                                      ("ForeachKernelSchedulerNode._filter_nodes_for_combo_kernel_grouping",)),
        "torch._inductor.lowering": ((), ("_pool_argmax_inner_fn",)),
    },
}


def targets_for(version_minor: str) -> dict[str, tuple[str, ...]]:
    """The functions to widen on torch `version_minor` (one of WRITTEN_FOR)."""
    targets = dict(_TARGETS_213)
    for module_name, (drop, add) in _CHANGED.get(version_minor, {}).items():
        targets[module_name] = tuple(n for n in targets[module_name] if n not in drop) + add
    return targets


# The running torch's list (the latest known one on a torch apply() refuses).
TARGETS: dict[str, tuple[str, ...]] = targets_for(minor() if minor() in WRITTEN_FOR else WRITTEN_FOR[-1])

_patched: dict[str, int] = {}


def _is_cpu_literal(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == "cpu"


class _Widen(ast.NodeTransformer):
    """`x == "cpu"` -> `x in ("cpu", "neuron")`; `!=` -> `not in`; `in (.., "cpu", ..)` gains "neuron"."""

    def __init__(self) -> None:
        self.count = 0

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if len(node.ops) != 1:
            return node
        op, left, right = node.ops[0], node.left, node.comparators[0]
        pair = ast.Tuple(elts=[ast.Constant("cpu"), ast.Constant(DEVICE)], ctx=ast.Load())
        if isinstance(op, (ast.Eq, ast.NotEq)) and (_is_cpu_literal(left) or _is_cpu_literal(right)):
            subject = right if _is_cpu_literal(left) else left
            self.count += 1
            new_op = ast.In() if isinstance(op, ast.Eq) else ast.NotIn()
            return ast.copy_location(ast.Compare(left=subject, ops=[new_op], comparators=[pair]), node)
        if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
            values = [e.value for e in right.elts if isinstance(e, ast.Constant)]
            if "cpu" in values and DEVICE not in values:
                right.elts.append(ast.Constant(DEVICE))
                self.count += 1
        return node


def _resolve(module: types.ModuleType, qualname: str):
    owner, obj = module, module
    for part in qualname.split("."):
        owner, obj = obj, getattr(obj, part)
    return owner, inspect.unwrap(obj)


def _recompile(fn: types.FunctionType) -> tuple[types.CodeType, int]:
    source = textwrap.dedent(inspect.getsource(fn))
    tree = ast.parse(source)
    fdef = tree.body[0]
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise TypeError(f"{fn.__qualname__} is not a plain function")
    fdef.decorator_list = []
    widen = _Widen()
    widen.visit(fdef)
    freevars = fn.__code__.co_freevars
    # Compile inside an outer function binding the same free variables, so the
    # new code object has the closure layout the function object expects.
    outer = ast.FunctionDef(
        name="__neuron_outer", args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=[ast.Assign(targets=[ast.Name(v, ast.Store())], value=ast.Constant(None)) for v in freevars]
        + [fdef, ast.Return(ast.Name(fdef.name, ast.Load()))],
        decorator_list=[], returns=None, type_params=[],
    )
    if "__class__" in freevars:  # methods using super()/__class__
        outer.body = outer.body[len(freevars):]
        cls_def = ast.ClassDef(name="__neuron_cls", bases=[], keywords=[], body=[fdef], decorator_list=[], type_params=[])
        outer.body = [ast.Assign(targets=[ast.Name(v, ast.Store())], value=ast.Constant(None))
                      for v in freevars if v != "__class__"] + [cls_def, ast.Return(ast.Constant(None))]
    module = ast.Module(body=[outer], type_ignores=[])
    ast.fix_missing_locations(module)
    ast.increment_lineno(module, fn.__code__.co_firstlineno - 1)
    code = compile(module, fn.__code__.co_filename, "exec")
    outer_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    stack = [outer_code]
    while stack:
        c = stack.pop()
        for const in c.co_consts:
            if isinstance(const, types.CodeType):
                if const.co_name == fn.__code__.co_name and const.co_name != "__neuron_cls":
                    new = const
                    if new.co_freevars != freevars:
                        raise RuntimeError(f"{fn.__qualname__}: closure layout changed {new.co_freevars} != {freevars}")
                    return new, widen.count
                stack.append(const)
    raise RuntimeError(f"{fn.__qualname__}: recompiled code not found")


def apply() -> dict[str, int]:
    """Patch every target once; returns {qualified name: number of widened comparisons}."""
    require("torch_neuronx.compiler._cpu_alike.apply (widens 'cpu' comparisons in torch._inductor)", WRITTEN_FOR)
    for module_name, names in TARGETS.items():
        module = importlib.import_module(module_name)
        for name in names:
            key = f"{module_name}.{name}"
            if key in _patched:
                continue
            _, fn = _resolve(module, name)
            code, count = _recompile(fn)
            if count == 0:
                raise RuntimeError(f"torch-neuronx: {key} has no 'cpu' comparison left to widen; "
                                   "the CPU-alike list needs updating for this torch version")
            fn.__code__ = code
            _patched[key] = count
    return dict(_patched)
