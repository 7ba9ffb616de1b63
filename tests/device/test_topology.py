"""Virtual topology: instance catalogue, LNC, visible cores, bad values."""
import json

import pytest
import torch

from tests.conftest import run_python

PROBE = """
    import json, torch
    n = torch.neuron.device_count()
    props = [torch.neuron.get_device_properties(i) for i in range(n)]
    print(json.dumps({"count": n, "mem": [p.total_memory for p in props],
                      "global": [p.logical_core_index for p in props],
                      "chip": props[0].name if props else None,
                      "current": torch.neuron.current_device()}))
"""

GiB = 1 << 30


def probe(env):
    r = run_python(PROBE, env=env, unset=("LOCAL_RANK",))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_default_is_trn2_3xlarge_with_lnc2():
    out = probe({})
    assert out["count"] == 4 and out["chip"] == "trn2"
    assert out["mem"] == [24 * GiB] * 4


def test_in_process_defaults():
    assert torch.neuron.device_count() == 4
    p = torch.neuron.get_device_properties(3)
    assert (p.name, p.total_memory, p.physical_cores) == ("trn2", 24 * GiB, 2)
    assert torch.neuron.get_device_name(3) == "neuron:3"
    assert torch.neuron.get_device_capability(0) == (3, 0)


@pytest.mark.parametrize("env,count,mem", [
    ({"NEURON_LOGICAL_NC_CONFIG": "1"}, 8, 12 * GiB),
    ({"TORCH_NEURONX_INSTANCE_TYPE": "trn2.48xlarge"}, 64, 24 * GiB),
    ({"TORCH_NEURONX_INSTANCE_TYPE": "trn3.3xlarge"}, 4, 36 * GiB),
    ({"TORCH_NEURONX_INSTANCE_TYPE": "trn3.3xlarge", "NEURON_LOGICAL_NC_CONFIG": "1"}, 8, 18 * GiB),
    ({"TORCH_NEURONX_HBM_BYTES_PER_CORE": "64MiB"}, 4, 64 << 20),
])
def test_catalogue(env, count, mem):
    out = probe(env)
    assert out["count"] == count
    assert set(out["mem"]) == {mem}


@pytest.mark.parametrize("value,expected", [("2", [2]), ("0-3", [0, 1, 2, 3]), ("0,2,5", [0, 2, 5]),
                                            ("1-2,6", [1, 2, 6])])
def test_visible_cores_restrict_and_renumber(value, expected):
    out = probe({"NEURON_RT_VISIBLE_CORES": value, "NEURON_LOGICAL_NC_CONFIG": "1"})
    assert out["count"] == len(expected)
    assert out["global"] == expected  # neuron:0 is the first visible core


@pytest.mark.parametrize("env,needle", [
    ({"NEURON_RT_VISIBLE_CORES": "0-x"}, "NEURON_RT_VISIBLE_CORES"),
    ({"NEURON_RT_VISIBLE_CORES": "7"}, "NEURON_RT_VISIBLE_CORES"),  # LNC=2: only 0-3 exist
    ({"NEURON_RT_VISIBLE_CORES": "3-1"}, "NEURON_RT_VISIBLE_CORES"),
    ({"NEURON_LOGICAL_NC_CONFIG": "3"}, "NEURON_LOGICAL_NC_CONFIG"),
    ({"TORCH_NEURONX_INSTANCE_TYPE": "p5.48xlarge"}, "TORCH_NEURONX_INSTANCE_TYPE"),
    ({"TORCH_NEURONX_HBM_BYTES_PER_CORE": "lots"}, "TORCH_NEURONX_HBM_BYTES_PER_CORE"),
])
def test_bad_environment_raises_on_first_use(env, needle):
    r = run_python("""
        import torch
        for use in (lambda: torch.ones(1, device="neuron"), torch.neuron.init,
                    lambda: torch.neuron.get_device_properties(0)):
            try:
                use()
                print("no error")
            except (RuntimeError, ValueError) as e:
                print("ERR", str(e).replace(chr(10), " "))
    """, env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 3
    for line in lines:
        assert line.startswith("ERR") and needle in line, line


def test_more_cores_than_pytorch_can_address():
    r = run_python("""
        import torch
        print(torch.neuron.device_count())
        try:
            torch.ones(1, device="neuron")
        except RuntimeError as e:
            print("NEURON_RT_VISIBLE_CORES" in str(e))
    """, env={"TORCH_NEURONX_INSTANCE_TYPE": "trn2.48xlarge", "NEURON_LOGICAL_NC_CONFIG": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "True"]
    out = probe({"TORCH_NEURONX_INSTANCE_TYPE": "trn2.48xlarge", "NEURON_LOGICAL_NC_CONFIG": "1",
                 "NEURON_RT_VISIBLE_CORES": "64-127"})
    assert out["count"] == 64 and out["global"][0] == 64 and set(out["mem"]) == {12 * GiB}


def test_invalid_ordinal_like_cuda():
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.ones(1, device="neuron:4")
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.neuron.set_device(7)
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.ones(1).to("neuron:9")
    assert torch.neuron.current_device() == 0


def test_local_rank_sets_initial_device():
    out = probe({"LOCAL_RANK": "3"})
    assert out["current"] == 3
    out = probe({"LOCAL_RANK": "3", "NEURON_RT_VISIBLE_CORES": "3"})
    assert out["current"] == 0  # one visible core: it is neuron:0
