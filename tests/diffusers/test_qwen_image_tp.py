"""The seed's Qwen-Image-2.1 TP example, offline under torchrun: TP image == single-device image (fp32),
both loading paths, forward all-reduces eagerly and inside compiled block graphs."""
from __future__ import annotations

import os

import pytest

from tests.diffusers.helpers import run_example

LAYERS, STEPS = 2, 2
ALLREDUCES = 2 * LAYERS * STEPS        # one per rowwise layer (to_out.0, img_mlp.out) per block per step


def _check(result, proc, world):
    assert proc.returncode == 0 and result is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert result["world_size"] == world
    assert result["match"], result                       # within fp32 tolerance (1e-4) of one NeuronCore
    assert result["max_abs_diff"] < 1e-4
    assert result["dtensor_params"] == 7 * LAYERS         # the 7 planned weights per block are DTensors
    assert os.path.getsize(result["saved"]) > 0           # rank 0 saved the image
    assert result["forward_collectives"] == {"allreduce": ALLREDUCES}


def test_load_path_two_ranks_eager(tmp_path):
    """from_pretrained(parallel_config=TensorParallelConfig(mesh=DeviceMesh("neuron"))): slices read from
    disk, no weight collectives. Two ranks, as everywhere in this file: the slicing and the all-reduces are
    the same code for any degree that divides the 8 heads (bad degrees: test_pipelines_compat), and four
    ranks on CI's two cores doubled the launch's cost."""
    result, proc = run_example(2, "--check", "--out", str(tmp_path / "img.png"),
                               "--tiny-dir", str(tmp_path / "pipe"))
    _check(result, proc, 2)
    assert result["load_collectives"] == {}


def test_load_path_two_ranks_compiled(tmp_path):
    """The seed's route: TP load + compile_repeated_blocks(backend="neuron", fullgraph=True, dynamic=False).
    The all-reduces run inside the compiled block graphs (counted at the neuron process group)."""
    result, proc = run_example(2, "--check", "--compile", "--out", str(tmp_path / "img.png"),
                               "--tiny-dir", str(tmp_path / "pipe"), timeout=400)
    _check(result, proc, 2)
    assert result["load_collectives"] == {}
    # KV-cache mode: extract step, guard change, cached step -> 3 graphs for both blocks; none on the 2nd call
    assert result["graphs_compiled"] == 3, result
    assert result["recompilations"] == 2, result


@pytest.mark.parametrize("path,load_collectives", [("memory", {}), ("scatter", {"scatter": 7 * LAYERS})])
def test_in_memory_paths_two_ranks(tmp_path, path, load_collectives):
    """A model already in memory, parallelised afterwards: diffusers' neuron path (enable_parallelism; each
    rank slices its CPU copy, no collectives) and the generic path (parallelize_module: one scatter per
    planned parameter from rank 0)."""
    result, proc = run_example(2, "--check", "--tp-path", path, "--out", str(tmp_path / "img.png"),
                               "--tiny-dir", str(tmp_path / "pipe"))
    _check(result, proc, 2)
    assert result["load_collectives"] == load_collectives
