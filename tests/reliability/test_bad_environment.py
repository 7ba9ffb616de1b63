"""Environment variables: malformed, out of range, huge. `import torch` never
fails or blows up; the first use of the device raises an error that names the
variable. The real import path is exercised for the two cases that used to go
wrong (a huge core range, an absurd HBM size); the parser itself is driven
through many more values in one child."""
from __future__ import annotations

import os
import resource
import subprocess
import sys

from tests.reliability.hostile import PRELUDE, raised, run_cases

USE = """
import torch, warnings
with case("first use"):
    torch.empty(2, device="neuron")
"""


def _limit_memory():  # a 0-400000000 list would need ~16 GB: 2 GB is enough to fail without it
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def test_huge_visible_core_range_is_checked_before_it_is_expanded():
    env = dict(os.environ, NEURON_RT_VISIBLE_CORES="0-400000000")
    proc = subprocess.run([sys.executable, "-c", PRELUDE + USE], env=env, capture_output=True, text=True,
                          timeout=240, preexec_fn=_limit_memory)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "NEURON_RT_VISIBLE_CORES='0-400000000' names core 400000000 (in '0-400000000')" in proc.stdout, proc.stdout
    assert "MemoryError" not in proc.stdout + proc.stderr


def test_absurd_hbm_size_names_the_variable_not_a_reinstall():
    results = run_cases(USE, env={"TORCH_NEURONX_HBM_BYTES_PER_CORE": "99999999999999999999999999"})
    raised(results, "first use", "NeuronEnvironmentError", "TORCH_NEURONX_HBM_BYTES_PER_CORE", "1 PiB")
    assert "Reinstall" not in results["_stderr"]["message"]


CASES = {
    "NEURON_RT_VISIBLE_CORES": ["0-999999999999999999999", "4", "0,0", "3-1", "a", "0-", "-1", "0,,1", "0-3,2"],
    "NEURON_RT_NUM_CORES": ["-1", "x", "99999999999999999999", "5"],
    "NEURON_LOGICAL_NC_CONFIG": ["0", "3", "99999999999999999999", "two"],
    "TORCH_NEURONX_HBM_BYTES_PER_CORE": ["0", "-5", "1e9", "12XB", "2000000TiB", "18446744073709551616"],
    "TORCH_NEURONX_INSTANCE_TYPE": ["trn9.huge", "x" * 10000],
}


def test_every_bad_value_names_its_variable():
    body = f"""
        import os, torch
        from torch_neuronx.runtime import discover
        for name, values in {CASES!r}.items():
            for value in values:
                os.environ[name] = value
                with case(f"{{name}}={{value[:40]}}"):
                    discover()
                del os.environ[name]
        with case("good environment still works"):
            assert discover().device_count == 4
    """
    results = run_cases(body, env={"TORCH_NEURONX_INSTANCE_TYPE": "trn2.3xlarge"})
    for name, values in CASES.items():
        for value in values:
            message = raised(results, f"{name}={value[:40]}", "NeuronEnvironmentError", name)
            assert len(message) < 600, message  # names the variable without echoing 10 kB
    assert results["good environment still works"]["error"] is None
