"""The product's imports respect the layer order written in docs/architecture.md.

Every `import` and `from ... import` of torch_neuronx, nki and neuron_hardware is read with `ast`
(lazy imports inside functions included, and product modules a command line starts with `-m`). A
module may import its own layer or a lower one; files must not import each other in a cycle, nor
may the sub-packages of one layer; and what a package takes from another package (a row of the
layer table) is that package's public API: never a module whose name starts with `_` (README.md,
"What is public": the modules behind a package's `__init__` are internal).

KNOWN_VIOLATIONS lists the imports against the order that the code still has: each is to be
replaced by a hook the lower layer offers and the higher one registers into. The test fails on any
import against the order that is not listed, and on a listed one that is gone (remove it from the
list), so the list only shrinks.
"""
from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("torch_neuronx", "nki", "neuron_hardware")
EXTENSION_MODULES = ("torch_neuronx._C",)  # compiled, no .py file, but a module of its own


def layer_table(doc: Path = ROOT / "docs" / "architecture.md") -> dict[str, int]:
    """{module prefix: layer number} from the table in docs/architecture.md."""
    table: dict[str, int] = {}
    for line in doc.read_text().splitlines():
        match = re.match(r"\|\s*(\d+)\s+[^|]*\|(.*)\|\s*$", line)
        if match:
            for name in re.findall(r"`([\w.]+)`", match.group(2)):
                table[name] = int(match.group(1))
    if not table:
        raise AssertionError(f"{doc} has no layer table ('| N name | `module` ... |' rows)")
    return table


def product_modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
    return modules


def imported_names(module: str, path: Path) -> list[str]:
    """Absolute dotted names each import statement of the file reaches: `import a.b` reaches `a.b`;
    `from a import b` reaches `a.b`, which is the submodule `a.b` when there is one and else a
    name of the package `a` (so a module importing a name from its own parent package depends on
    that package's `__init__`, as Python runs it). A product module started as a program
    (`[sys.executable, "-m", "torch_neuronx.plan", ...]`) is reached too: the process runs it."""
    names: list[str] = []
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: None if is_package else -1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names.extend(f"{target}.{alias.name}" if alias.name != "*" else target for alias in node.names)
        elif isinstance(node, (ast.List, ast.Tuple)):
            names.extend(started_modules(node.elts))
    return names


def started_modules(items: list[ast.expr]) -> list[str]:
    """Product modules a command line runs: the string after a "-m" item of a list or tuple."""
    out = []
    for flag, name in zip(items, items[1:]):
        if (isinstance(flag, ast.Constant) and flag.value == "-m" and isinstance(name, ast.Constant)
                and isinstance(name.value, str) and name.value.split(".")[0] in PACKAGES):
            out.append(name.value)
    return out


def known_modules() -> set[str]:
    return set(product_modules()) | set(EXTENSION_MODULES)


def imported_modules(module: str, path: Path, known: set[str]) -> set[str]:
    """The product modules the file imports: each name it reaches as the longest known module
    (`torch_neuronx.__version__` is the package `torch_neuronx`)."""
    targets = set()
    for name in imported_names(module, path):
        parts = name.split(".")
        while parts and ".".join(parts) not in known:
            parts.pop()
        if parts and ".".join(parts) != module:
            targets.add(".".join(parts))
    return targets


def import_graph() -> dict[str, set[str]]:
    """{module: modules of the product it imports}."""
    known = known_modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in product_modules().items():
        graph[module] |= imported_modules(module, path, known)
    return graph


def layer_of(module: str, table: dict[str, int]) -> int:
    prefixes = [p for p in table if module == p or module.startswith(p + ".")]
    if not prefixes:
        raise AssertionError(f"{module} is in no layer of docs/architecture.md: add its package to the table")
    return table[max(prefixes, key=len)]


def package_of(module: str, table: dict[str, int]) -> str:
    return max((p for p in table if module == p or module.startswith(p + ".")), key=len)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    nodes = sorted(set(graph) | {t for targets in graph.values() for t in targets})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            advanced = False
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph.get(target, ())))))
                    advanced = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def upward_imports(graph, table) -> set[tuple[str, str]]:
    return {(module, target) for module, targets in graph.items() for target in targets
            if layer_of(target, table) > layer_of(module, table)}


def private_imports(graph, table) -> set[tuple[str, str]]:
    """(importer, imported) where the imported module belongs to another package of the layer table
    and a part of its name below that package starts with `_` (`torch_neuronx.estimate._graphs`)."""
    found = set()
    for module, targets in graph.items():
        for target in targets:
            package = package_of(target, table)
            below = target[len(package):].split(".")
            if package != package_of(module, table) and any(part.startswith("_") for part in below if part):
                found.add((module, target))
    return found


# Imports against the order that the code still has (importer, imported).
KNOWN_VIOLATIONS: set[tuple[str, str]] = set()
# Private modules of other packages still imported: the entry layer's registration installs each
# package's hooks at startup (docs/architecture.md "Hooks"). The list only shrinks.
KNOWN_PRIVATE_IMPORTS: set[tuple[str, str]] = {
    ("torch_neuronx._registration", "torch_neuronx.compat._numerics_sweep"),
    ("torch_neuronx._registration", "torch_neuronx.compiler._default_backend"),
    ("torch_neuronx._registration", "torch_neuronx.estimate._graphs"),
    ("torch_neuronx._registration", "torch_neuronx.runtime._exit_guard"),
}
KNOWN_FILE_CYCLES: list[list[str]] = []
KNOWN_PACKAGE_CYCLES: list[list[str]] = []


def test_layer_table_covers_every_module():
    table = layer_table()
    for module in product_modules():
        layer_of(module, table)


def assert_only_known(found: set, known: set, known_name: str, problem: str, line) -> None:
    """No (importer, imported) pair beyond the `known` ones, and none of those gone (the list only shrinks)."""
    new, gone = sorted(found - known), sorted(known - found)
    assert not new, f"{problem}:\n  " + "\n  ".join(line(a, b) for a, b in new)
    assert not gone, f"no longer imported: remove from {known_name}:\n  " + "\n  ".join(map(str, gone))


def test_no_new_upward_import():
    table = layer_table()
    assert_only_known(upward_imports(import_graph(), table), KNOWN_VIOLATIONS, "KNOWN_VIOLATIONS",
                      "imports against the layer order of docs/architecture.md (a lower layer must offer a "
                      "hook that the higher one registers into)",
                      lambda a, b: f"{a} (layer {layer_of(a, table)}) imports {b} (layer {layer_of(b, table)})")


def test_no_new_private_import():
    assert_only_known(private_imports(import_graph(), layer_table()), KNOWN_PRIVATE_IMPORTS, "KNOWN_PRIVATE_IMPORTS",
                      "imports of another package's internal module (make what is needed public in that "
                      "package's `__all__` and import it from the package, or move the code)",
                      lambda a, b: f"{a} imports {b}")


def test_no_new_file_cycle():
    found = cycles(import_graph())
    new = [c for c in found if c not in KNOWN_FILE_CYCLES]
    gone = [c for c in KNOWN_FILE_CYCLES if c not in found]
    assert not new, "files that import each other in a cycle:\n  " + "\n  ".join(" <-> ".join(c) for c in new)
    assert not gone, "cycle gone: remove from KNOWN_FILE_CYCLES:\n  " + "\n  ".join(map(str, gone))


def test_no_new_package_cycle():
    table = layer_table()
    packages: dict[str, set[str]] = defaultdict(set)
    for module, targets in import_graph().items():
        for target in targets:
            a, b = package_of(module, table), package_of(target, table)
            if a != b:
                packages[a].add(b)
    found = cycles(packages)
    new = [c for c in found if c not in KNOWN_PACKAGE_CYCLES]
    gone = [c for c in KNOWN_PACKAGE_CYCLES if c not in found]
    assert not new, "sub-packages that import each other in a cycle:\n  " + "\n  ".join(" <-> ".join(c) for c in new)
    assert not gone, "cycle gone: remove from KNOWN_PACKAGE_CYCLES:\n  " + "\n  ".join(map(str, gone))


@pytest.mark.parametrize("source, expected", [
    ("import torch_neuronx.plan._report\n", "upward"),
    ("def f():\n    from torch_neuronx.tools import top\n", "upward"),
])
def test_an_upward_import_is_caught(tmp_path, source, expected):
    """The checker itself: a runtime file importing a layer-5 module, lazily or not, is upward."""
    table = layer_table()
    fake = tmp_path / "probe.py"
    fake.write_text(source)
    names = imported_names("torch_neuronx.runtime.probe", fake)
    known = set(product_modules())
    targets = {n for n in names if n in known}
    assert targets and all(layer_of(t, table) > layer_of("torch_neuronx.runtime.probe", table) for t in targets)


def test_a_cycle_is_caught():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("source, module, caught", [
    ("from ..estimate._graphs import observe\n", "torch_neuronx.plan.probe", True),        # another package's internals
    ("from ..estimate import collectives\n", "torch_neuronx.plan.probe", False),           # its public module
    ("from . import _child\n", "torch_neuronx.plan.probe", False),                         # its own package's
    ("from .. import plan\n", "torch_neuronx.runtime.probe", False),                       # a name of the parent package
    ("import subprocess, sys\nsubprocess.run([sys.executable, '-m', 'torch_neuronx.plan._run'])\n",
     "torch_neuronx.estimate.probe", True),                                               # a child process's module
])
def test_a_private_import_is_caught(tmp_path, source, module, caught):
    """The checker itself: a planted import of another package's `_module`, by `import` or by
    starting it with `python -m`, is a private import; public modules and one's own are not."""
    table = layer_table()
    fake = tmp_path / "probe.py"
    fake.write_text(source)
    graph = {module: imported_modules(module, fake, known_modules())}
    assert bool(private_imports(graph, table)) == caught


def test_a_parent_package_import_is_seen(tmp_path):
    """A name imported from a parent package is a dependency on that package's `__init__`: an
    upward one when the parent is a higher layer (`from torch_neuronx import __version__` in the
    compiler reaches the entry layer)."""
    fake = tmp_path / "probe.py"
    fake.write_text("from .. import __version__\nfrom . import hooks\n")
    graph = {"torch_neuronx.compiler.probe": imported_modules("torch_neuronx.compiler.probe", fake, known_modules())}
    assert graph["torch_neuronx.compiler.probe"] == {"torch_neuronx", "torch_neuronx.compiler.hooks"}
    assert upward_imports(graph, layer_table()) == {("torch_neuronx.compiler.probe", "torch_neuronx")}
