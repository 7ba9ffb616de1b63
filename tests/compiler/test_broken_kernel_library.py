"""A kernel library left empty or truncated in the compile cache by a killed build is removed and
rebuilt by the next compile that needs it (torch_neuronx/compiler/_kernel_libraries.py). CI met this:
a 0-byte `<key>.main.so` failed every later compile of that kernel with "file too short"."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

from tests.reliability._compile_child import tiny_graph, tiny_input
from torch_neuronx.compiler import _kernel_libraries as kernel_libraries

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _compile_in_fresh_process(folder):
    r = subprocess.run([sys.executable, "-m", "tests.reliability._compile_child", str(folder), "1"],
                       capture_output=True, text=True, cwd=REPO, timeout=600,
                       env={**os.environ, "TORCH_NEURONX_NEFF_CACHE_DIR": str(folder),
                            "TORCHINDUCTOR_COMPILE_THREADS": "1"})
    return r


def _libraries(folder):
    # the graph's kernel libraries, not Inductor's vector-ISA test libraries (test_vec_isa_record.py)
    return [os.path.join(d, f) for d, _, files in os.walk(folder) for f in files if f.endswith(".main.so")]


@pytest.fixture(scope="module")
def primed(tmp_path_factory):
    """A cache folder after one cold compile (kernel and Inductor's vector-ISA test libraries built), shared
    by both damage cases: the cold process is the costly one."""
    folder = tmp_path_factory.mktemp("broken-library-cache")
    first = _compile_in_fresh_process(folder)
    assert first.returncode == 0, first.stderr[-3000:]
    assert _libraries(folder), "the compile built no kernel library"
    return folder


@pytest.mark.parametrize("damage", ["empty", "truncated"])
def test_a_library_left_by_a_killed_build_is_rebuilt(primed, damage):
    folder = primed
    libraries = _libraries(folder)
    # What a process killed inside the linker leaves: the library, empty or cut short, and its build
    # folder, but no FX-graph or AOTAutograd entry (those are written after the build)
    root = folder / f"torch-{torch.__version__}"
    for entries in ("fxgraph", "aotautograd"):
        shutil.rmtree(root / entries, ignore_errors=True)
    for lib in libraries:
        size = os.path.getsize(lib)
        with open(lib, "r+b") as f:
            f.truncate(0 if damage == "empty" else size // 3)
        os.makedirs(lib[: -len(".so")] + "_CxxBuild", exist_ok=True)

    second = _compile_in_fresh_process(folder)
    assert second.returncode == 0, second.stderr[-3000:]   # a cut-short library was SIGBUS before the check
    torch.testing.assert_close(torch.tensor(json.loads(second.stdout.split("RESULT", 1)[1])["out"]),
                               tiny_graph(tiny_input("cpu")))
    assert "could not be loaded" in second.stderr and "rebuilt" in second.stderr, second.stderr[-3000:]
    for lib in libraries:
        assert os.path.getsize(lib) > 1000 and kernel_libraries.whole(lib), lib
        assert not os.path.exists(lib[: -len(".so")] + "_CxxBuild")
    if damage == "truncated":   # the rebuilt library serves later processes silently
        third = _compile_in_fresh_process(folder)
        assert third.returncode == 0 and "could not be loaded" not in third.stderr, third.stderr[-3000:]


def test_only_a_library_inside_the_cache_folder_counts(tmp_path):
    inside = tmp_path / "cache" / "ab" / "abkey.main.so"
    inside.parent.mkdir(parents=True)
    inside.write_bytes(b"")
    outside = tmp_path / "elsewhere.so"
    outside.write_bytes(b"")
    load_error = ImportError(f"{inside}: file too short")
    wrapped = RuntimeError("InductorError: ImportError")
    wrapped.__cause__ = load_error
    assert kernel_libraries.broken_library(wrapped, str(tmp_path / "cache")) == str(inside)
    assert kernel_libraries.broken_library(ImportError(f"{outside}: file too short"), str(tmp_path / "cache")) is None
    assert kernel_libraries.broken_library(ValueError(f"{inside}"), str(tmp_path / "cache")) is None


def test_a_failure_that_is_not_a_broken_library_is_raised_unchanged(tmp_path):
    calls = []

    def compile_once():
        calls.append(1)
        raise ValueError("a lowering error")

    with pytest.raises(ValueError, match="a lowering error"):
        kernel_libraries.compile_repairing(compile_once, str(tmp_path), lock_timeout=5)
    assert calls == [1]


def test_a_library_rebuilt_by_another_process_meanwhile_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    lib = tmp_path / "cd" / "cdkey.main.so"
    lib.parent.mkdir()
    lib.write_bytes(b"")
    real_stat = os.stat
    seen = []

    def stat_then_rebuilt(path, *a, **k):   # the other process replaces it between our two looks
        result = real_stat(path, *a, **k)
        if str(path) == str(lib) and not seen:
            seen.append(1)
            lib.write_bytes(b"\x7fELF" + b"\0" * 4096)
        return result

    monkeypatch.setattr(os, "stat", stat_then_rebuilt)
    assert kernel_libraries.discard(str(lib), lock_timeout=5) is False
    monkeypatch.setattr(os, "stat", real_stat)
    assert lib.read_bytes().startswith(b"\x7fELF")
