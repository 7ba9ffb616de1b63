"""The estimate tests read no instance/LNC/assumption settings from the caller's environment."""
import pytest


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for k in ("TORCH_NEURONX_INSTANCE_TYPE", "NEURON_LOGICAL_NC_CONFIG", "TORCH_NEURONX_ESTIMATE_ASSUMPTIONS",
              "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
