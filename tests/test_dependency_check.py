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
