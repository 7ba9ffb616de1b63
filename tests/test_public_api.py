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
