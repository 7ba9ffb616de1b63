"""Bad input: a model that does not fit the NeuronCore's HBM stops the SFT run early, on every
rank, with a message naming the core, the sizes and the settings that would make it fit.

TORCH_NEURONX_HBM_BYTES_PER_CORE shrinks every core below the tiny model's embedding table (80 KiB in
fp32), so the first weight the Trainer moves (or transformers shards) onto the core does not fit.
"""
from __future__ import annotations

import pytest

from tests.training.sft_harness import sft_all

HBM = "64KiB"
HBM_BYTES = 64 * 1024
FAIL_FAST_S = 180  # a healthy tiny run takes ~15 s (the three below run at once); a hung rank would hit this

# What a user needs from the message: where, how much, and each setting that changes the outcome.
SETTINGS_NAMED = ("DistributedConfig(tp_size, fsdp_size)", "TP_SIZE x FSDP_SIZE", "max_length", "bfloat16",
                  "NEURON_LOGICAL_NC_CONFIG", "TORCH_NEURONX_HBM_BYTES_PER_CORE")


def _assert_oom_message(output: str) -> None:
    assert "torch.OutOfMemoryError: Neuron out of memory. Tried to allocate" in output, output[-4000:]
    assert "on neuron:0" in output
    assert f"has 64.00 KiB ({HBM_BYTES} bytes) of HBM" in output, output[-4000:]
    assert "are allocated to tensors" in output
    missing = [s for s in SETTINGS_NAMED if s not in output]
    assert not missing, (missing, output[-3000:])


@pytest.fixture(scope="module")
def too_small(assets, sft_root):
    """One process, TP2 and FSDP2 under torchrun, all with cores too small for the model, launched at once."""
    flags = ("--dtype", "float32", "--bf16", "false")
    env = {"TORCH_NEURONX_HBM_BYTES_PER_CORE": HBM}
    return sft_all(assets, {
        "single": (str(sft_root / "hbm-too-small"), flags, dict(env=env)),
        (2, 1): (str(sft_root / "hbm-too-small-tp2-fsdp1"), flags, dict(nproc=2, tp=2, fsdp=1, env=env)),
        (1, 2): (str(sft_root / "hbm-too-small-tp1-fsdp2"), flags, dict(nproc=2, tp=1, fsdp=2, env=env)),
    }, check=False, timeout=FAIL_FAST_S)


def test_model_larger_than_core_hbm_stops_single_process(too_small):
    summary, proc = too_small["single"]
    assert proc.returncode != 0 and summary is None
    _assert_oom_message(proc.stdout)
    assert "{'loss'" not in proc.stdout  # it stopped before the first training step


@pytest.mark.parametrize("tp,fsdp", [(2, 1), (1, 2)], ids=["tp2", "fsdp2"])
def test_model_larger_than_core_hbm_stops_every_torchrun_rank(tp, fsdp, too_small):
    """Under torchrun every rank runs out of HBM while the weights load or move; torchrun ends the job
    with a failure instead of leaving a rank waiting in a collective (the harness deadline would catch it)."""
    summary, proc = too_small[(tp, fsdp)]
    assert proc.returncode != 0 and summary is None
    _assert_oom_message(proc.stdout)
    assert "ChildFailedError" in proc.stdout, proc.stdout[-3000:]  # torchrun reported the failed ranks
