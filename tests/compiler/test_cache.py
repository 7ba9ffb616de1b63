"""The compile cache: in memory, on disk (TORCH_NEURONX_NEFF_CACHE_DIR), the
disable switch, versioned keys, corrupt entries, unwritable folders, and a
second process served from disk."""
from __future__ import annotations

import json
import os

import pytest
import torch

import torch_neuronx
from tests.compiler.conftest import elementwise, neuron_randn
from tests.conftest import run_python
from torch_neuronx.compiler import _cache as cache, _options as options, _version as version


def _compile_and_check(shape=(2, 8)):
    x, y = neuron_randn(*shape), neuron_randn(*shape, seed=1)
    torch.testing.assert_close(torch.compile(elementwise, backend="neuron")(x, y), elementwise(x, y))


def test_memory_cache_serves_a_recompiled_frame():
    _compile_and_check()
    before = torch_neuronx.compiler.get_dynamo_metrics()
    torch._dynamo.reset()  # Dynamo forgets the frame; our cache still has the program
    _compile_and_check()
    after = torch_neuronx.compiler.get_dynamo_metrics()
    assert after["cache_hits_memory"] == before["cache_hits_memory"] + 1
    assert after["graphs_compiled"] == before["graphs_compiled"]


def test_disable_switch_turns_both_caches_off(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TORCH_NEURONX_NEFF_DISABLE_CACHE", "1")
    for _ in range(2):
        torch._dynamo.reset()
        _compile_and_check()
    m = torch_neuronx.compiler.get_dynamo_metrics()
    assert m["cache_hits_memory"] == 0 and m["cache_hits_disk"] == 0
    assert m["graphs_compiled"] == 2
    assert os.listdir(tmp_path) == []  # nothing written to the configured folder


def test_on_disk_cache_lives_in_configured_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path))
    cache.clear_memory_cache()
    _compile_and_check()
    root = tmp_path / f"torch-{torch.__version__}"
    assert (root / "fxgraph").is_dir() and (root / "aotautograd").is_dir()
    sealed = [f for _, _, files in os.walk(root / "fxgraph") for f in files if f.endswith(".neuron-sha256")]
    assert sealed
    # The process-wide Inductor cache folder is left as it was.
    assert os.environ.get("TORCHINDUCTOR_CACHE_DIR", "") != str(root)


def test_default_folder_is_per_user(monkeypatch):
    monkeypatch.delenv("TORCH_NEURONX_NEFF_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "/home/someone/.cache")
    assert options.cache_dir() == "/home/someone/.cache/torch_neuronx/neff_cache"


def test_keys_include_torch_and_backend_versions(monkeypatch):
    from torch._inductor.codegen.common import custom_backend_passes

    _compile_and_check()  # registers the device pass
    gm = torch.fx.symbolic_trace(elementwise)
    inputs = [neuron_randn(2, 8), neuron_randn(2, 8)]
    base = cache.graph_key(gm, inputs)
    assert cache.graph_key(gm, inputs) == base
    assert cache.graph_key(gm, [neuron_randn(3, 8), neuron_randn(3, 8)]) != base
    monkeypatch.setattr(torch, "__version__", "0.0.0-other")
    assert cache.graph_key(gm, inputs) != base
    monkeypatch.undo()
    monkeypatch.setattr(cache, "backend_version", lambda: "other-backend")
    assert cache.graph_key(gm, inputs) != base
    # Inductor's FX-graph and AOTAutograd keys hash the device pass uuid: our backend version.
    assert custom_backend_passes["neuron"].uuid().startswith(version.backend_version())   # + the host GEMM policy
    assert any(p.endswith(".so") for p in version.backend_files())


def test_unwritable_folder_warns_and_caches_in_memory(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(blocker / "cache"))
    cache.clear_memory_cache()
    with pytest.warns(RuntimeWarning, match="not writable; using an in-memory cache only"):
        _compile_and_check()
    torch._dynamo.reset()
    _compile_and_check()
    assert torch_neuronx.compiler.get_dynamo_metrics()["cache_hits_memory"] >= 1


def test_corrupt_entry_is_detected_recompiled_and_replaced(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path))
    cache.clear_memory_cache()
    _compile_and_check()
    root = str(tmp_path / f"torch-{torch.__version__}")
    entries = list(cache._entry_files(root))
    assert entries
    for path in entries:  # truncate every entry
        with open(path, "r+b") as f:
            f.truncate(max(1, os.path.getsize(path) // 3))
    torch._dynamo.reset()
    cache.clear_memory_cache()
    with pytest.warns(RuntimeWarning, match="corrupt compile cache entr"):
        _compile_and_check()
    assert cache.verify_entries(root) == []  # replaced by sound entries
    assert list(cache._entry_files(root))


WARM_SCRIPT = """
import json, time, torch, torch_neuronx.compiler as c
g = torch.Generator().manual_seed(0)
x = torch.randn(5, 7, generator=g).to("neuron"); y = torch.randn(5, 7, generator=g).to("neuron")
def f(x, y):
    return (torch.relu(x) * y).sin() + 1
t = time.perf_counter()
out = torch.compile(f, backend="neuron")(x, y)
m = c.get_dynamo_metrics()
m["seconds"] = time.perf_counter() - t
m["max_diff"] = (out.cpu() - f(x, y).cpu()).abs().max().item()
print("METRICS" + json.dumps(m))
"""


def test_second_process_hits_the_disk_cache(tmp_path):
    env = {"TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path)}
    runs = []
    for _ in range(2):
        result = run_python(WARM_SCRIPT, env=env, timeout=400)
        assert result.returncode == 0, result.stderr[-3000:]
        runs.append(json.loads(result.stdout.split("METRICS", 1)[1]))
    cold, warm = runs
    assert cold["max_diff"] < 1e-5 and warm["max_diff"] < 1e-5
    assert cold["cache_misses"] == 1 and cold["cache_hits_disk"] == 0
    assert warm["cache_hits_disk"] == 1 and warm["cache_misses"] == 0
