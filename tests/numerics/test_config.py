"""TORCH_NEURONX_NUMERICS and its settings: parsing, validation, host mode installs nothing."""
import pytest
import torch

from torch_neuronx import numerics
from torch_neuronx.numerics import config
from torch_neuronx.runtime.env import NeuronEnvironmentError

from .helpers import run_mode


def test_defaults(monkeypatch):
    for name in (config.MODE, config.INT64, config.FLOAT64, config.FP8_OVERFLOW, config.SR_ENABLE,
                 config.SR_SEED, config.REPORT):
        monkeypatch.delenv(name, raising=False)
    cfg = config.from_environment()
    assert (cfg.mode, cfg.int64, cfg.float64, cfg.fp8_overflow) == ("host", "wrap", "float32", "nan")
    assert not cfg.stochastic_rounding and cfg.stochastic_rounding_seed == 0 and cfg.report_at_exit


def test_settings_parse(monkeypatch):
    monkeypatch.setenv(config.MODE, " Trainium ")
    monkeypatch.setenv(config.INT64, "native")
    monkeypatch.setenv(config.FLOAT64, "raise")
    monkeypatch.setenv(config.FP8_OVERFLOW, "saturate")
    monkeypatch.setenv(config.SR_ENABLE, "true")
    monkeypatch.setenv(config.SR_SEED, "1234")
    cfg = config.from_environment()
    assert (cfg.mode, cfg.int64, cfg.float64, cfg.fp8_overflow) == ("trainium", "native", "raise", "saturate")
    assert cfg.stochastic_rounding and cfg.stochastic_rounding_seed == 1234
    # every setting that changes results is in the compile cache key
    assert cfg.key_fields() != config.NumericsConfig(mode="trainium").key_fields()
    assert config.NumericsConfig().key_fields() == ("numerics", "host")


@pytest.mark.parametrize("name,value,expect", [
    (config.MODE, "chek", "host, check, trainium"),
    (config.INT64, "int32", "wrap, native"),
    (config.FLOAT64, "bf16", "float32, raise"),
    (config.FP8_OVERFLOW, "inf", "nan, saturate"),
    (config.SR_ENABLE, "maybe", "1/true or 0/false"),
    (config.SR_SEED, "x", "integer seed"),
    (config.SR_SEED, "-1", "between 0"),
])
def test_bad_values_name_the_variable(monkeypatch, name, value, expect):
    monkeypatch.setenv(name, value)
    with pytest.raises(NeuronEnvironmentError) as info:
        config.from_environment()
    assert name in str(info.value) and expect in str(info.value)


def test_host_mode_installs_nothing():
    # The test session runs in host mode: no dispatch mode, nothing on the op path.
    assert numerics.mode() == "host"
    assert torch._C._len_torch_dispatch_stack() == 0
    assert "host mode" in numerics.numerics_report()


def test_bad_mode_at_startup_warns_and_runs_host():
    result, stderr = run_mode("""
import warnings
warnings.simplefilter("always")
import torch
from torch_neuronx import numerics
x = torch.ones(2, device="neuron") + 1
result = {"stack": torch._C._len_torch_dispatch_stack(), "x": x.cpu().tolist()}
try:
    numerics.numerics_report()
except Exception as err:
    result["error"] = f"{type(err).__name__}: {err}"
""", {"TORCH_NEURONX_NUMERICS": "emulate"})
    assert result["stack"] == 0 and result["x"] == [2.0, 2.0]
    assert "TORCH_NEURONX_NUMERICS='emulate' is not valid; use one of host, check, trainium" in stderr
    assert result["error"].startswith("NeuronEnvironmentError") and "host, check, trainium" in result["error"]
