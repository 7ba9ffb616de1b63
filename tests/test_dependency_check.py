"""The suite refuses to run without its test dependencies (tests/dependencies.py, tests/conftest.py)."""
import textwrap

from tests.conftest import run_python
from tests.dependencies import PYPROJECT, missing_test_dependencies


def test_installed_suite_has_every_test_dependency():
    assert missing_test_dependencies() == []


def test_absent_wrong_version_and_unimportable_dependencies_are_named(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(textwrap.dedent("""
        [project]
        name = "torch-neuronx"
        [project.optional-dependencies]
        hf = ["pytest<1", "no-such-package-for-neuron-tests"]
        test = ["torch-neuronx[hf]", "expecttest"]
    """))
    missing = missing_test_dependencies(pyproject)
    assert any(line.startswith("pytest<1 (found ") for line in missing), missing
    assert "no-such-package-for-neuron-tests (not installed)" in missing, missing
    assert not any("expecttest" in line for line in missing), missing


def test_hidden_expecttest_fails_collection_instead_of_skipping(tmp_path):
    """Before the check, the op sweep skipped as a module (exit 5, about 80% of the suite gone)."""
    (tmp_path / "sitecustomize.py").write_text(textwrap.dedent("""
        import sys
        class _Hide:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "expecttest":
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        sys.meta_path.insert(0, _Hide())
    """))
    root = str(PYPROJECT.parent)
    proc = run_python(f"import sys, pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', "
                      f"'--collect-only', {root + '/tests/device/test_op_sweep.py'!r}]))",
                      env={"PYTHONPATH": f"{tmp_path}:{root}"}, cwd=root)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "expecttest" in proc.stdout + proc.stderr and "missing test dependencies" in proc.stdout + proc.stderr


def test_a_dependency_that_is_installed_but_fails_to_import_is_named(tmp_path):
    """Found on disk is not enough: the check imports each dependency's modules."""
    site = tmp_path / "site"
    (site / "brokenneuronpkg").mkdir(parents=True)
    (site / "brokenneuronpkg" / "__init__.py").write_text("raise ImportError('needs libfoo.so')\n")
    dist = site / "brokenneuronpkg-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenneuronpkg\nVersion: 1.0\n")
    (dist / "top_level.txt").write_text("brokenneuronpkg\n")
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""
        [project]
        name = "torch-neuronx"
        [project.optional-dependencies]
        test = ["brokenneuronpkg"]
    """))
    root = str(PYPROJECT.parent)
    proc = run_python(f"from tests.dependencies import missing_test_dependencies; "
                      f"print(missing_test_dependencies(__import__('pathlib').Path({str(tmp_path / 'pyproject.toml')!r})))",
                      env={"PYTHONPATH": f"{site}:{root}"}, cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert "brokenneuronpkg (installed as 1.0, but `import brokenneuronpkg` fails: ImportError: needs libfoo.so)" in proc.stdout, proc.stdout
