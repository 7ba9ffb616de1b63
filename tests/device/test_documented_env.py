"""docs/virtual-runtime.md, "Topology" and "Environment variables": the instance types, the LNC rules and
NEURON_RT_NUM_CORES. The topology is computed from the environment by torch_neuronx.runtime.discover, so
most cases run it in-process with the variables set; one fresh interpreter checks what torch.neuron shows."""
import json

import pytest

from tests.conftest import run_python
from torch_neuronx.runtime import discover, env

GiB = 1 << 30
VARIABLES = (env.INSTANCE_TYPE, env.LOGICAL_NC_CONFIG, env.VISIBLE_CORES, env.NUM_CORES,
             env.HBM_BYTES_PER_CORE)


@pytest.fixture
def topology_env(monkeypatch):
    """Set the runtime's variables (every other one unset) and discover the topology."""
    def discover_with(**values):
        for name in VARIABLES:
            monkeypatch.delenv(name, raising=False)
        for name, value in values.items():
            monkeypatch.setenv(name, value)
        return discover()
    return discover_with


# The documented table: instance -> (chip, core version, logical cores at the default LNC, default LNC,
# HBM per logical core at the default LNC).
@pytest.mark.parametrize("instance,chip,version,cores,lnc,hbm", [
    ("trn1.2xlarge", "trn1", "NeuronCore-v2", 2, 1, 16 * GiB),
    ("trn1.32xlarge", "trn1", "NeuronCore-v2", 32, 1, 16 * GiB),
    ("trn2u.48xlarge", "trn2", "NeuronCore-v3", 64, 2, 24 * GiB),
    ("trn3.48xlarge", "trn3", "NeuronCore-v4", 64, 2, 36 * GiB),
])
def test_instance_types(topology_env, instance, chip, version, cores, lnc, hbm):
    topo = topology_env(**{env.INSTANCE_TYPE: instance})
    assert (topo.chip.name, topo.chip.core_version, topo.lnc) == (chip, version, lnc)
    assert topo.device_count == topo.total_logical_cores == cores
    assert {c.hbm_bytes for c in topo.cores} == {hbm}


def test_trn1_supports_only_lnc1(topology_env):
    with pytest.raises(env.NeuronEnvironmentError, match=r"NEURON_LOGICAL_NC_CONFIG=2 is not supported on trn1; use 1"):
        topology_env(**{env.INSTANCE_TYPE: "trn1.32xlarge", env.LOGICAL_NC_CONFIG: "2"})


def test_lnc2_pairs_physical_cores_chip_by_chip(topology_env):
    """Logical core i of chip c holds physical cores 8c+2i and 8c+2i+1; LNC=1 is one core each."""
    topo = topology_env(**{env.INSTANCE_TYPE: "trn2u.48xlarge"})
    for core in topo.cores:
        c, i = divmod(core.global_index, 4)
        assert core.chip_index == c and core.physical_cores == (8 * c + 2 * i, 8 * c + 2 * i + 1)
    one = topology_env(**{env.INSTANCE_TYPE: "trn3.3xlarge", env.LOGICAL_NC_CONFIG: "1"})
    assert [c.physical_cores for c in one.cores] == [(i,) for i in range(8)]
    assert {c.hbm_bytes for c in one.cores} == {18 * GiB}


def test_128_logical_cores_need_visible_cores(topology_env):
    """trn3.48xlarge at LNC=1 has 128 logical cores, one more than a process can address."""
    with pytest.raises(env.NeuronEnvironmentError, match=r"at most 127 .*NEURON_RT_VISIBLE_CORES"):
        topology_env(**{env.INSTANCE_TYPE: "trn3.48xlarge", env.LOGICAL_NC_CONFIG: "1"})
    topo = topology_env(**{env.INSTANCE_TYPE: "trn3.48xlarge", env.LOGICAL_NC_CONFIG: "1",
                           env.VISIBLE_CORES: "64-127"})
    assert topo.total_logical_cores == 128 and topo.device_count == 64
    assert topo.cores[0].global_index == 64 and {c.hbm_bytes for c in topo.cores} == {18 * GiB}


def test_num_cores_keeps_the_first_n_visible_cores(topology_env):
    assert [c.global_index for c in topology_env(**{env.NUM_CORES: "3"}).cores] == [0, 1, 2]
    assert topology_env(**{env.NUM_CORES: "0"}).device_count == 4  # 0 means all
    topo = topology_env(**{env.VISIBLE_CORES: "1-3", env.NUM_CORES: "2"})
    assert [c.global_index for c in topo.cores] == [1, 2]  # visible first, then the first N of those
    with pytest.raises(env.NeuronEnvironmentError, match=r"NEURON_RT_NUM_CORES=3 asks for more cores than the 2"):
        topology_env(**{env.VISIBLE_CORES: "0,2", env.NUM_CORES: "3"})
    with pytest.raises(env.NeuronEnvironmentError, match=r"NEURON_RT_NUM_CORES='-1' must be >= 0"):
        topology_env(**{env.NUM_CORES: "-1"})


def test_num_cores_is_what_torch_neuron_sees():
    r = run_python("""
        import json, torch
        print(json.dumps([torch.neuron.device_count(),
                          [torch.neuron.get_device_properties(i).logical_core_index
                           for i in range(torch.neuron.device_count())]]))
    """, env={env.VISIBLE_CORES: "1-3", env.NUM_CORES: "2"}, unset=("LOCAL_RANK",))
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == [2, [1, 2]]
