"""Each layer's package states its public API: `__all__` names what is public, every name in it
imports, the package docstring lists it, and README.md's "What is public" table lists it too."""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Packages with an `__all__`, bottom layer to top (docs/architecture.md).
PACKAGES = [
    "neuron_hardware",
    "nki", "nki.isa", "nki.language", "nki.typing",
    "torch_neuronx.runtime", "torch_neuronx.ops_support", "torch_neuronx.kernels",
    "torch_neuronx.compiler", "torch_neuronx.distributed",
    "torch_neuronx.estimate",
    "torch_neuronx.plan", "torch_neuronx.numerics", "torch_neuronx.profiling",
    "torch_neuronx.nki_integration",
    "torch_neuronx.integrations", "torch_neuronx.compat",
]
# Packages whose docstring lists every public name (nki.language's 128 NKI names are listed by
# docs/nki.md; the others' docstrings describe their entry points).
DOCSTRING_LISTS_ALL = [
    "neuron_hardware", "nki", "torch_neuronx.runtime", "torch_neuronx.ops_support", "torch_neuronx.kernels",
    "torch_neuronx.numerics", "torch_neuronx.profiling", "torch_neuronx.nki_integration",
    "torch_neuronx.integrations",
]
# Rows of README's table that stand for several packages' `__all__` (nki's subpackages).
README_ROW = {"nki.isa": None, "nki.language": None, "nki.typing": None}


def public_names(package: str) -> list[str]:
    names = importlib.import_module(package).__all__
    assert isinstance(names, list) and all(isinstance(n, str) for n in names), f"{package}.__all__ must be a list of names"
    assert len(set(names)) == len(names), f"{package}.__all__ names a name twice"
    return names


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_imports(package):
    """`from package import *` binds every name of `__all__` (submodules named there are imported)."""
    namespace: dict = {}
    exec(f"from {package} import *", namespace)
    missing = [name for name in public_names(package) if name not in namespace]
    assert not missing, f"{package}.__all__ names what the package does not have: {missing}"


@pytest.mark.parametrize("package", DOCSTRING_LISTS_ALL)
def test_docstring_lists_the_public_names(package):
    doc = importlib.import_module(package).__doc__ or ""
    unlisted = [name for name in public_names(package) if not re.search(rf"\b{re.escape(name)}\b", doc)]
    assert not unlisted, f"{package}'s docstring does not mention its public names {unlisted}"


def readme_rows() -> dict[str, str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("### What is public", 1)[1]
    rows = {}
    for line in section.splitlines():
        match = re.match(r"\|\s*`([\w.]+)`[^|]*\|(.*)\|\s*$", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


@pytest.mark.parametrize("package", [p for p in PACKAGES if README_ROW.get(p, p) is not None])
def test_readme_table_lists_the_public_names(package):
    rows = readme_rows()
    assert package in rows, f"README.md 'What is public' has no row for {package}"
    unlisted = [name for name in public_names(package) if f"`{name}`" not in rows[package]]
    assert not unlisted, f"README.md 'What is public' row of {package} misses {unlisted}"


def test_a_missing_public_name_is_caught(tmp_path, monkeypatch):
    """The check itself: a package whose `__all__` names something it lacks fails the import check."""
    (tmp_path / "probe_pkg").mkdir()
    (tmp_path / "probe_pkg" / "__init__.py").write_text('"""probe: `present`."""\n__all__ = ["present", "absent"]\npresent = 1\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AttributeError, match="absent"):
        exec("from probe_pkg import *", {})


# Packages whose modules show public or internal by their name: a module without a leading
# underscore is public, everything else is `_name.py` (as torch_neuronx/distributed/ does).
NAMED_PACKAGES = [
    "torch_neuronx/runtime", "torch_neuronx/compiler", "torch_neuronx/estimate",
    "torch_neuronx/plan", "torch_neuronx/plan/models", "torch_neuronx/plan/distributed",
    "torch_neuronx/profiling", "torch_neuronx/tools", "torch_neuronx/tools/api",
]
# Public modules the rule below does not see, each with why it is public. Keep it small.
PUBLIC_BY_REASON: dict[str, str] = {}
USER_FACING = ["README.md", "docs", "examples", "benchmarks", ".ci"]


def user_facing_text() -> str:
    parts = []
    for name in USER_FACING:
        path = ROOT / name
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in {".md", ".py", ".sh", ".yml", ".yaml"})
        parts += [f.read_text(errors="replace") for f in files]
    return "\n".join(parts)


def why_public(module: str, text: str, scripts: str) -> str | None:
    """Why `module` (dotted) is public, or None: named in its package's `__all__` or in README's row
    of the package (or of the nearest package above with a row), run by users (`python -m`, a console
    script), or imported by users by its documented path."""
    package, name = module.rsplit(".", 1)
    if name in getattr(importlib.import_module(package), "__all__", []):
        return "__all__"
    rows, owner = readme_rows(), package
    while owner not in rows and "." in owner:
        owner = owner.rsplit(".", 1)[0]
    if owner in rows and f"`{name}`" in rows[owner]:
        return "README row"
    if re.search(rf"\b{re.escape(module)}[:\s]", scripts):
        return "console script"
    if re.search(rf"(?<![\w.]){re.escape(module)}(?![\w])", text):
        return "documented path"
    if re.search(rf"from {re.escape(package)} import (\(?[\w, ]*\b){re.escape(name)}\b", text):
        return "documented import"
    return PUBLIC_BY_REASON.get(module)


def unnamed_modules() -> list[str]:
    modules = []
    for folder in NAMED_PACKAGES:
        for path in sorted((ROOT / folder).glob("*.py")):
            if not path.stem.startswith("_"):
                modules.append(f"{folder.replace('/', '.')}.{path.stem}")
    return modules


def test_modules_without_underscore_are_public():
    text, scripts = user_facing_text(), (ROOT / "pyproject.toml").read_text()
    internal = [m for m in unnamed_modules() if why_public(m, text, scripts) is None]
    assert not internal, (f"modules neither in `__all__`, README's 'What is public', a documented command nor "
                          f"a documented import: {internal}; rename each to `_name.py` (or document it)")
    stale = [m for m in PUBLIC_BY_REASON if m not in unnamed_modules()]
    assert not stale, f"PUBLIC_BY_REASON names modules that are gone or renamed: {stale}"


def test_an_undocumented_module_is_internal():
    """The check itself: a module nobody documents is not public; a documented one is."""
    text, scripts = user_facing_text(), (ROOT / "pyproject.toml").read_text()
    assert why_public("torch_neuronx.estimate.no_such_helper", text, scripts) is None
    assert why_public("torch_neuronx.plan.calibrate", text, scripts) == "documented path"
    assert why_public("torch_neuronx.tools.ls", text, scripts) == "console script"
    assert why_public("torch_neuronx.estimate.hardware", text, scripts) == "__all__"
    assert why_public("torch_neuronx.tools.api.registry", text, scripts) == "README row"


def names_taken_from_other_packages() -> list[tuple[str, str, str]]:
    """(importer, package, name) for each `from <package> import <name>` of the product where the
    package states its API (PACKAGES) and is a row of the layer table (docs/architecture.md) other
    than the importer's own, and the name is not one of the package's modules."""
    from tests.test_layers import imported_names, known_modules, layer_table, package_of, product_modules

    table, known, taken = layer_table(), known_modules(), []
    for module, path in product_modules().items():
        for name in imported_names(module, path):
            package, _, attr = name.rpartition(".")
            if package in PACKAGES and package in table and package != package_of(module, table) and name not in known:
                taken.append((module, package, attr))
    return taken


def test_what_a_package_takes_from_another_is_public_there():
    """A name one package imports from another package is in that package's `__all__` (README.md:
    the modules and names behind `__init__` are internal)."""
    hidden = sorted({(m, p, n) for m, p, n in names_taken_from_other_packages()
                     if n not in (getattr(importlib.import_module(p), "__all__", None) or [])})
    assert not hidden, ("names imported from another package that are not in its `__all__` (add them there, "
                        "with README's row, or move the code):\n  "
                        + "\n  ".join(f"{m} imports {n} from {p}" for m, p, n in hidden))
