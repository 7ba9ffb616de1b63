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


@pytest.fixture(scope="session")
def neuron_fp32(assets, sft_root):
    """Single process on neuron, fp32, full Trainer checkpoints every 2 steps (for resume)."""
    out = str(sft_root / "neuron-fp32")
    summary, _ = sft_harness.sft(assets, out, "--dtype", "float32", "--bf16", "false",
                                 "--save_only_model", "false", "--save_steps", "2")
    return out, summary


@pytest.fixture(scope="session")
def tp2_fsdp2(assets, sft_root):
    out = str(sft_root / "tp2-fsdp2")
    summary, _ = sft_harness.sft(assets, out, "--dtype", "float32", "--bf16", "false", nproc=4, tp=2, fsdp=2,
                                 env={"HF_DEACTIVATE_ASYNC_LOAD": "1"})
    return out, summary
