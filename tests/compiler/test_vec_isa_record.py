"""Inductor's vector-ISA test libraries are loaded in a child process once per library and CPU, not once per
process: a marker next to each library remembers a successful load. Cache keys and the chosen ISA stay the same."""
from __future__ import annotations

import glob
import json
import os

import pytest

from tests.conftest import run_python

SCRIPT = """
import json, torch, torch_neuronx.compiler as c
from torch._inductor import cpu_vec_isa
children = []
import subprocess
real_run = subprocess.run
def counting_run(cmd, *a, **k):
    if isinstance(cmd, list) and len(cmd) > 2 and cmd[1] == "-c" and "LoadLibrary" in cmd[2]:
        children.append(cmd[2])
    return real_run(cmd, *a, **k)
subprocess.run = counting_run
x = torch.arange(12.0).reshape(3, 4).to("neuron")
out = torch.compile(lambda t: (t * 2).sin() + 1, backend="neuron")(x)
m = c.get_dynamo_metrics()
print("RESULT" + json.dumps({"children": len(children), "isa": str(cpu_vec_isa.pick_vec_isa()),
                             "hits_disk": m["cache_hits_disk"], "misses": m["cache_misses"],
                             "diff": (out.cpu() - ((torch.arange(12.0).reshape(3, 4) * 2).sin() + 1)).abs().max().item()}))
"""


def _run(cache_dir):
    result = run_python(SCRIPT, env={"TORCH_NEURONX_NEFF_CACHE_DIR": str(cache_dir)}, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.split("RESULT", 1)[1])


def _markers(cache_dir):
    """The load markers: ours on torch 2.13, Inductor's own (`.load_ok`) from 2.14 on."""
    from torch_neuronx.compiler._vec_isa import marker_glob

    return glob.glob(os.path.join(str(cache_dir), "**", marker_glob()), recursive=True)


def _marker_library(marker):
    return marker[:-len(".load_ok")] if marker.endswith(".load_ok") else marker.rsplit(".loaded-", 1)[0]


@pytest.fixture(scope="module")
def primed(tmp_path_factory):
    """A fresh cache folder after its first process (the costly one: kernel and test libraries built cold),
    shared by both tests: (folder, first result, markers right after it)."""
    folder = tmp_path_factory.mktemp("vec-isa-cache")
    first = _run(folder)
    return folder, first, _markers(folder)


def test_probes_once_then_hits_and_distrusts_a_damaged_or_stale_marker(primed):
    """One fresh cache folder through three processes (each a fresh interpreter, the costly part): the first
    probes and writes the markers, the second skips the probes and hits the cache, the third finds one marker
    truncated and another library touched since, and probes those again."""
    tmp_path, first, markers = primed
    assert first["misses"] == 1 and first["diff"] < 1e-6
    # a fresh cache folder: the first process probes (else the counter no longer sees the probes,
    # and every count below would be 0 == 0)
    assert first["children"] >= 1, first
    assert len(markers) == first["children"]  # one marker per library that loaded
    second = _run(tmp_path)
    assert second["children"] == 0
    assert second["isa"] == first["isa"]  # the same ISA is chosen
    assert second["hits_disk"] == 1 and second["misses"] == 0 and second["diff"] < 1e-6

    from torch_neuronx.compiler._vec_isa import INDUCTOR_MARKS_LOADS
    from torch_neuronx._torch_versions import minor

    if INDUCTOR_MARKS_LOADS[minor()]:
        # Inductor keeps the markers (existence only) and we write none; damage is Inductor's business
        assert not glob.glob(os.path.join(str(tmp_path), "**", "*.loaded-*"), recursive=True)
        return
    with open(markers[0], "w") as f:
        f.write("[1, ")  # truncated
    library = _marker_library(markers[0])
    if len(markers) > 1:
        other = _marker_library(markers[1])
        os.utime(other, ns=(1, 1))  # the library changed since its marker was written
    again = _run(tmp_path)
    assert again["children"] == min(2, len(markers))
    assert again["isa"] == first["isa"] and again["diff"] < 1e-6
    with open(markers[0]) as f:
        st = os.stat(library)
        assert json.load(f) == [st.st_size, st.st_mtime_ns]  # rewritten after the child loaded it


def test_a_damaged_test_library_is_rebuilt_not_taken_as_an_unsupported_isa(primed):
    """A test library emptied or cut short by a build killed in the linker used to fail every later check,
    so each later process compiled without that ISA (scalar kernels, other cache keys), silently. The folder
    is the primed one (after the test above, its libraries and markers are whole again)."""
    tmp_path, first, _ = primed
    libraries = [_marker_library(m) for m in _markers(tmp_path)]
    assert libraries, first
    for i, library in enumerate(libraries):
        with open(library, "r+b") as f:
            f.truncate(0 if i % 2 == 0 else os.path.getsize(library) // 3)
    for marker in _markers(tmp_path):
        os.remove(marker)
    result = run_python(SCRIPT, env={"TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path)}, timeout=400)
    assert result.returncode == 0, result.stderr[-3000:]
    again = json.loads(result.stdout.split("RESULT", 1)[1])
    assert again["isa"] == first["isa"] and again["diff"] < 1e-6
    assert again["hits_disk"] == 1, again   # the same ISA flags: the same cache keys as the first process
    assert result.stderr.count("removed and rebuilt") == len(libraries), result.stderr[-3000:]
    assert all(os.path.getsize(library) > 1000 for library in libraries)
