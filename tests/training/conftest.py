from __future__ import annotations

import os

import pytest

from tests.training import sft_harness


@pytest.fixture(scope="session")
def sft_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("sft")
    os.environ.setdefault("HF_DATASETS_CACHE", str(root / "hf-datasets-cache"))
    return root


@pytest.fixture(scope="session")
def assets(sft_root):
    from sft_tiny_assets import ensure_assets

    ensure_assets(str(sft_root / "assets"))
    return str(sft_root / "assets")


FP32 = ("--dtype", "float32", "--bf16", "false")


@pytest.fixture(scope="session")
def fp32_runs(assets, sft_root):
    """Single process, fp32: on neuron with full Trainer checkpoints every 2 steps (for resume), and on CPU;
    both at once (sft_harness.sft_all)."""
    return sft_harness.sft_all(assets, {
        "neuron": (str(sft_root / "neuron-fp32"), (*FP32, "--save_only_model", "false", "--save_steps", "2"), {}),
        "cpu": (str(sft_root / "cpu-fp32"), (*FP32, "--use_cpu", "true"), {}),
    })


@pytest.fixture(scope="session")
def neuron_fp32(fp32_runs, sft_root):
    """(output folder, summary) of the single-process fp32 neuron run."""
    return str(sft_root / "neuron-fp32"), fp32_runs["neuron"][0]


@pytest.fixture(scope="session")
def tp2_fsdp2(assets, sft_root):
    out = str(sft_root / "tp2-fsdp2")
    summary, _ = sft_harness.sft(assets, out, "--dtype", "float32", "--bf16", "false", nproc=4, tp=2, fsdp=2,
                                 env={"HF_DEACTIVATE_ASYNC_LOAD": "1"})
    return out, summary
