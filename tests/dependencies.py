"""Test dependencies are a hard requirement: a missing one fails the run before collection.

pyproject.toml's `test` extra (with the extras it names) is the one list of them. Each must be
installed at a version its pin allows, and its top-level modules must be importable; a
missing one used to turn most of the suite into silent skips (`importorskip("expecttest")`).
"""
from __future__ import annotations

import importlib
import importlib.metadata
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _requirements(pyproject: Path, extra: str = "test") -> list[Requirement]:
    project = tomllib.loads(pyproject.read_text())["project"]
    own = canonicalize_name(project["name"])
    extras = project.get("optional-dependencies", {})
    found, todo, seen = [], [extra], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for line in extras.get(name, []):
            req = Requirement(line)
            if canonicalize_name(req.name) == own:  # "torch-neuronx[hf]": expand our own extras
                todo.extend(req.extras)
            else:
                found.append(req)
    return found


def _modules_by_distribution() -> dict[str, list[str]]:
    """Installed distribution (canonical name) -> its public top-level modules; one scan (~0.3 s)."""
    found: dict[str, list[str]] = {}
    for module, dists in importlib.metadata.packages_distributions().items():
        if not module.startswith("_"):
            for dist in dists:
                found.setdefault(canonicalize_name(dist), []).append(module)
    return found


def missing_test_dependencies(pyproject: Path = PYPROJECT, extra: str = "test") -> list[str]:
    """One line per test dependency that is absent, at a version its pin excludes, or not importable."""
    problems = []
    modules = _modules_by_distribution()
    for req in _requirements(pyproject, extra):
        try:
            version = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            problems.append(f"{req} (not installed)")
            continue
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            problems.append(f"{req} (found {version})")
            continue
        for module in sorted(modules.get(canonicalize_name(req.name), [])):
            # Imported for real: a package whose files are there but whose import fails (a broken
            # dependency of its own, a wrong binary) would otherwise fail tests one by one.
            try:
                importlib.import_module(module)
            except Exception as err:  # noqa: BLE001 - any failure to import is the finding
                problems.append(f"{req} (installed as {version}, but `import {module}` fails: "
                                f"{type(err).__name__}: {err})")
    return problems
