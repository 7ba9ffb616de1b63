"""One hardware table: runtime, NKI simulator and cost model read the same figures; assumptions
are named and overridable; bad instance types, LNC values and dtypes name the valid ones."""
import json
import subprocess
import sys

import pytest

import neuron_hardware
from nki.targets import TARGETS
from torch_neuronx.estimate import hardware
from torch_neuronx import runtime
from torch_neuronx.runtime import env


def test_runtime_nki_and_cost_model_share_the_table():
    for name, spec in neuron_hardware.CHIPS.items():
        assert TARGETS[name].sbuf_partition_bytes == spec.sbuf_partition_bytes
        assert TARGETS[name].dve_ghz == spec.dve_ghz and TARGETS[name].pe_ghz == spec.pe_ghz
    assert runtime.INSTANCE_TYPES is neuron_hardware.INSTANCES
    hw = hardware("trn2.3xlarge", 2)
    assert hw.view == runtime.resolve("trn2.3xlarge", 2) == neuron_hardware.logical_core_view("trn2.3xlarge", 2)
    assert hw.tensor_flops("bfloat16") == 2 * 79e12 and hw.tensor_flops("float32") == 2 * 20e12
    assert hw.hbm_bytes_per_s == pytest.approx(2.9e12 / 4)
    assert hardware("trn2.3xlarge", 1).hbm_bytes_per_s == pytest.approx(2.9e12 / 8)
    assert hardware("trn3.3xlarge", 1).tensor_flops("float8_e4m3fn") == 315e12


def test_table_imports_without_torch():
    out = subprocess.run([sys.executable, "-c", "import sys, neuron_hardware, nki.targets; "
                          "print('torch' in sys.modules)"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_defaults_follow_the_runtime_environment(monkeypatch):
    assert hardware().name == "trn2.3xlarge LNC=2"
    monkeypatch.setenv(env.INSTANCE_TYPE, "trn3.48xlarge")
    monkeypatch.setenv(env.LOGICAL_NC_CONFIG, "1")
    assert hardware().name == "trn3.48xlarge LNC=1"


def test_bad_instance_lnc_and_dtype_name_the_valid_ones(monkeypatch):
    with pytest.raises(ValueError, match=r"instance_type='trn9.1xlarge'.*trn2\.48xlarge"):
        hardware("trn9.1xlarge")
    monkeypatch.setenv(env.INSTANCE_TYPE, "nope")   # a bad variable: the runtime's error and words
    with pytest.raises(env.NeuronEnvironmentError, match="TORCH_NEURONX_INSTANCE_TYPE='nope'.*trn1.32xlarge"):
        hardware()
    with pytest.raises(ValueError, match="lnc=2 is not supported on trn1; use 1"):
        hardware("trn1.32xlarge", 2)
    import torch_neuronx
    with pytest.raises(ValueError, match=r"instance='trn2\.huge'.*trn3\.48xlarge"):
        torch_neuronx.estimate(instance="trn2.huge")
    with pytest.raises(ValueError, match="dtype 'float128'.*bfloat16"):
        hardware("trn2.3xlarge").tensor_flops("float128")


def test_assumptions_override_inline_file_and_argument(monkeypatch, tmp_path):
    base = hardware("trn2.3xlarge").assumptions
    monkeypatch.setenv(env.ESTIMATE_ASSUMPTIONS, "matmul_efficiency=0.5, eager_launch_s=0")
    a = hardware("trn2.3xlarge").assumptions
    assert a.matmul_efficiency == 0.5 and a.eager_launch_s == 0 and a.hbm_efficiency == base.hbm_efficiency
    path = tmp_path / "a.json"
    path.write_text(json.dumps({"graph_launch_s": 1e-3}))
    monkeypatch.setenv(env.ESTIMATE_ASSUMPTIONS, str(path))
    assert hardware("trn2.3xlarge").assumptions.graph_launch_s == 1e-3
    assert hardware("trn2.3xlarge", assumptions={"graph_launch_s": 2e-3}).assumptions.graph_launch_s == 2e-3
    for bad, msg in [("matmul_eff=1", "'matmul_eff' is not an assumption.*Valid names: matmul_efficiency"),
                     ("hbm_efficiency=1.5", "efficiency: use a value in"),
                     ("eager_launch_s=fast", "is not a number"), ("/no/such/file", "readable JSON")]:
        monkeypatch.setenv(env.ESTIMATE_ASSUMPTIONS, bad)
        with pytest.raises(env.NeuronEnvironmentError, match="TORCH_NEURONX_ESTIMATE_ASSUMPTIONS") as err:
            hardware("trn2.3xlarge")
        assert err.match(msg)
