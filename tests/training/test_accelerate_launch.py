"""`accelerate launch` with MULTI_NEURON runs examples/accelerate_train_loop.py like on any multi-device setup.

Each launch is a fresh `python -m accelerate.commands.launch` in its own process group with a deadline
(sft_harness.run: the group is killed on timeout), so a hung rank fails the test instead of the suite.
Reference numbers come from the same script in one process, on neuron and on CPU.
"""
from __future__ import annotations

import json
import os
import sys

import pytest

from tests.training import sft_harness

SCRIPT = os.path.join(sft_harness.REPO, "examples", "accelerate_train_loop.py")
# 2 ranks x 4 samples = the single-process batch of 8; 2 micro-batches per optimizer step, 6 steps.
LOOP_FLAGS = ("--steps", "6", "--gradient_accumulation_steps", "2", "--seed", "1234")
MULTI_NEURON_YAML = """\
compute_environment: LOCAL_MACHINE
distributed_type: MULTI_NEURON
num_machines: 1
num_processes: 2
machine_rank: 0
mixed_precision: 'no'
gpu_ids: all
use_cpu: false
"""
TIMEOUT_S = 180


def _summary(proc) -> dict:
    lines = [line for line in proc.stdout.splitlines() if line.startswith("SUMMARY ")]
    assert proc.returncode == 0 and len(lines) == 1, proc.stdout[-6000:]
    return json.loads(lines[0][len("SUMMARY "):])


def _launch(launch_flags: list[str], *loop_flags: str):
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--main_process_port", "0", *launch_flags, SCRIPT,
           *LOOP_FLAGS, "--per_device_batch_size", "4", *loop_flags]
    return sft_harness.run(cmd, sft_harness._env(None), TIMEOUT_S)


def _single(*loop_flags: str) -> list[str]:
    return [sys.executable, SCRIPT, *LOOP_FLAGS, "--per_device_batch_size", "8", *loop_flags]


@pytest.fixture(scope="module")
def config_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("accelerate") / "multi_neuron.yaml"
    path.write_text(MULTI_NEURON_YAML)
    return str(path)


@pytest.fixture(scope="module")
def two_ranks_on_cores_1_3(config_file) -> dict:
    return _summary(_launch(["--config_file", config_file, "--gpu_ids", "1,3"]))


@pytest.fixture(scope="module")
def singles() -> dict:
    """The one-process references on neuron and on CPU, both at once (sft_harness.run_all)."""
    env = sft_harness._env(None)
    neuron, cpu = sft_harness.run_all([(_single(), env), (_single("--cpu"), env)], TIMEOUT_S)
    return {"neuron": _summary(neuron), "cpu": _summary(cpu)}


@pytest.fixture(scope="module")
def single_neuron(singles) -> dict:
    return singles["neuron"]


@pytest.fixture(scope="module")
def single_cpu(singles) -> dict:
    return singles["cpu"]


def _assert_multi_neuron(summary: dict) -> None:
    assert summary["distributed_type"] == "DistributedType.MULTI_NEURON", summary
    assert summary["num_processes"] == 2
    for rank in summary["ranks"]:
        # accelerate takes torch.neuron.current_device(), which the runtime starts at LOCAL_RANK
        assert rank["device"] == rank["param_device"] == f"neuron:{rank['local_rank']}", rank
    assert sorted(r["process_index"] for r in summary["ranks"]) == [0, 1]


def test_config_file_multi_neuron_each_rank_on_its_core(two_ranks_on_cores_1_3):
    _assert_multi_neuron(two_ranks_on_cores_1_3)


def test_gpu_ids_sets_neuron_rt_visible_cores(two_ranks_on_cores_1_3):
    """accelerate 1.15 exports `--gpu_ids` as NEURON_RT_VISIBLE_CORES when neuron is available; the runtime
    then shows exactly those cores, renumbered from 0: rank r runs on instance core [1, 3][r]."""
    ranks = sorted(two_ranks_on_cores_1_3["ranks"], key=lambda r: r["process_index"])
    assert [r["visible_cores_env"] for r in ranks] == ["1,3", "1,3"]
    assert [r["device_count"] for r in ranks] == [2, 2]
    assert [r["instance_core"] for r in ranks] == [1, 3]


def test_two_ranks_match_one_process_and_cpu(two_ranks_on_cores_1_3, single_neuron, single_cpu):
    """Same global batch, so DDP + gradient accumulation give the one-process losses (fp32)."""
    multi = two_ranks_on_cores_1_3
    assert single_neuron["distributed_type"] == "DistributedType.NO" and single_neuron["device"].startswith("neuron")
    assert single_cpu["device"] == "cpu"
    assert len(multi["step_losses"]) == 6 and len(multi["micro_losses"]) == 12
    # the model trains: without it, equal losses would prove nothing
    assert multi["step_losses"][-1] < 0.7 * multi["step_losses"][0], multi["step_losses"]
    for ref in (single_neuron, single_cpu):
        assert sft_harness.max_diff(multi["micro_losses"], ref["micro_losses"]) < 1e-5
        assert sft_harness.max_diff(multi["lrs"], ref["lrs"]) < 1e-12
        assert abs(multi["weights_abs_sum"] - ref["weights_abs_sum"]) < 1e-3
    # one process on neuron is the same computation as on CPU: bit for bit
    assert single_neuron["micro_losses"] == single_cpu["micro_losses"]


def test_save_state_then_load_state_continues_like_uninterrupted(config_file, tmp_path):
    """Launched with flags only (`--multi_gpu --num_processes 2`), then resumed from a config-file launch.
    Input noise is drawn from the neuron generator: equal losses need its state back too."""
    state = str(tmp_path / "state")
    noise = ("--input_noise", "0.3")
    full = _summary(_launch(["--multi_gpu", "--num_processes", "2"], *noise, "--save_state_at", "3",
                            "--state_dir", state))
    _assert_multi_neuron(full)
    assert sorted(os.listdir(state)) == ["loop_step.json", "model.safetensors", "optimizer.bin",
                                         "random_states_0.pkl", "random_states_1.pkl", "scheduler.bin"]
    resumed = _summary(_launch(["--config_file", config_file], *noise, "--load_state", state))
    _assert_multi_neuron(resumed)
    assert resumed["start_step"] == 3 and resumed["final_step"] == 6
    assert sft_harness.max_diff(resumed["step_losses"], full["step_losses"][3:]) < 1e-6
    assert resumed["lrs"] == full["lrs"][3:]
    assert abs(resumed["weights_abs_sum"] - full["weights_abs_sum"]) < 1e-6


def test_gpu_ids_naming_missing_cores_stops_every_rank(config_file):
    """Cores 5 and 9 do not exist (4 visible by default): without the check each rank would silently train
    alone on CPU (accelerate's fallback when no accelerator is found); instead every rank stops early with a
    message naming NEURON_RT_VISIBLE_CORES and --gpu_ids."""
    proc = _launch(["--config_file", config_file, "--gpu_ids", "5,9"])
    assert proc.returncode != 0, proc.stdout[-4000:]
    assert "SUMMARY" not in proc.stdout
    assert "NEURON_RT_VISIBLE_CORES='5,9' names core 5" in proc.stdout, proc.stdout[-4000:]
    assert "Fix --gpu_ids" in proc.stdout
