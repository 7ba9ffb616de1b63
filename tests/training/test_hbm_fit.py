"""Issue 6, bad input: a model that does not fit the NeuronCore's HBM stops the SFT run early, on every
rank, with a message naming the core, the sizes and the settings that would make it fit.

TORCH_NEURONX_HBM_BYTES_PER_CORE shrinks every core below the tiny model's embedding table (80 KiB in
fp32), so the first weight the Trainer moves (or transformers shards) onto the core does not fit.
"""
from __future__ import annotations

import pytest

from tests.training.sft_harness import sft

HBM = "64KiB"
HBM_BYTES = 64 * 1024
FAIL_FAST_S = 120  # a healthy tiny run takes ~15 s; a hung rank would hit this and fail the test

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


def test_model_larger_than_core_hbm_stops_single_process(assets, sft_root):
    summary, proc = sft(assets, str(sft_root / "hbm-too-small"), "--dtype", "float32", "--bf16", "false",
                        env={"TORCH_NEURONX_HBM_BYTES_PER_CORE": HBM}, check=False, timeout=FAIL_FAST_S)
    assert proc.returncode != 0 and summary is None
    _assert_oom_message(proc.stdout)
    assert "{'loss'" not in proc.stdout  # it stopped before the first training step


@pytest.mark.parametrize("tp,fsdp", [(2, 1), (1, 2)], ids=["tp2", "fsdp2"])
def test_model_larger_than_core_hbm_stops_every_torchrun_rank(tp, fsdp, assets, sft_root):
    """Under torchrun every rank runs out of HBM while the weights load or move; torchrun ends the job
    with a failure instead of leaving a rank waiting in a collective (the harness deadline would catch it)."""
    summary, proc = sft(assets, str(sft_root / f"hbm-too-small-tp{tp}-fsdp{fsdp}"), "--dtype", "float32",
                        "--bf16", "false", nproc=tp * fsdp, tp=tp, fsdp=fsdp,
                        env={"TORCH_NEURONX_HBM_BYTES_PER_CORE": HBM}, check=False, timeout=FAIL_FAST_S)
    assert proc.returncode != 0 and summary is None
    _assert_oom_message(proc.stdout)
    assert "ChildFailedError" in proc.stdout, proc.stdout[-3000:]  # torchrun reported the failed ranks
