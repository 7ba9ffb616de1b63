"""`accelerate test` passes on neuron, in one process and MULTI_NEURON with 2.

`accelerate test` is accelerate's own self-check (test_utils/scripts/test_script.py under
`accelerate-launch`): process control, `gather`/`pad_across_processes` (all_gather_into_tensor of an
input (1, 2) into a flat output), RNG sync, dataloader sharding, and training checks that compare
the prepared model after 3 epochs with a one-process CPU baseline, among them
`Accelerator(mixed_precision="fp16")` (accelerate's fp16 device table lacks neuron; see
torch_neuronx/integrations/accelerate_fp16.py). Both launches run at once.
"""
from __future__ import annotations

import sys

import pytest

from tests.clients import harness
from tests.distributed.dist_harness import free_port

CONFIG = """\
compute_environment: LOCAL_MACHINE
distributed_type: {kind}
num_machines: 1
num_processes: {n}
machine_rank: 0
main_process_port: {port}
mixed_precision: 'no'
gpu_ids: all
use_cpu: false
"""
SUCCESS = "Test is a success! You are ready for your distributed training!"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("accelerate-test")
    launches = {1: "'NO'", 2: "MULTI_NEURON"}
    cmds = []
    for n, kind in launches.items():
        config = folder / f"{n}.yaml"
        config.write_text(CONFIG.format(kind=kind, n=n, port=free_port()))
        cmds.append(([sys.executable, "-m", "accelerate.commands.accelerate_cli", "test", "--config_file",
                      str(config)], None))
    return dict(zip(launches, harness.run_all(cmds, timeout=300)))


@pytest.mark.parametrize("processes", [1, 2])
def test_accelerate_test_passes(runs, processes):
    out = runs[processes].stdout
    assert runs[processes].returncode == 0 and SUCCESS in out, out[-8000:]
    assert out.count("FP16 training check.") == 2 * processes, out[-8000:]  # seedable sampler off and on
    # printed by the main process, once per sampler setting, after the model equalled the CPU baseline
    assert out.count("Training yielded the same results on one CPU or distributed setup with batch split") == 2
    if processes == 2:
        assert "DistributedType.MULTI_NEURON  Backend: neuron" in out
        assert "Device: neuron:0" in out and "Device: neuron:1" in out
    else:
        assert "Device: neuron" in out
