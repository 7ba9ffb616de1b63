"""neuron-ls: header, table, JSON, topology, processes, bad input."""
from __future__ import annotations

import json

import pytest

from torch_neuronx.tools import ls


def _run(capsys, *argv):
    code = ls.main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_table_and_json_of_a_trn2_48xlarge(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_NEURONX_INSTANCE_TYPE", "trn2.48xlarge")
    monkeypatch.setenv("TORCH_NEURONX_RUNTIME_DIR", str(tmp_path))  # no process
    code, out, _ = _run(capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "instance-type: trn2.48xlarge"
    assert lines[1].startswith("instance-id: i-") and len(lines[1].split()[1]) == 19
    assert lines[2] == "logical-neuroncore-config: 2"
    assert "| NEURON | NEURON |  NEURON  | NEURON |" in lines[4]
    row0 = next(line for line in lines if line.startswith("| 0 "))
    assert [c.strip() for c in row0.strip("|").split("|")][:5] == ["0", "4", "0-3", "96 GiB", "12, 3, 4, 1"]
    assert sum(1 for line in lines if line.startswith("| ")) == 2 + 16  # two header lines, 16 chips
    code, out, _ = _run(capsys, "-j")
    chips = json.loads(out)
    assert len(chips) == 16
    assert chips[5]["connected_to"] == [1, 4, 9, 6] and chips[5]["neuroncore_ids"] == [20, 21, 22, 23]
    assert chips[0]["memory_size"] == 103079215104 and chips[0]["nc_count"] == 4
    assert set(chips[0]) == {"neuron_device", "bdf", "cpu_affinity", "numa_node", "connected_to", "nc_count",
                             "logical_neuroncore_config", "memory_size", "neuroncore_ids", "neuron_processes"}
    assert isinstance(chips[0]["numa_node"], str) and chips[0]["neuron_processes"] == []
    code, out, _ = _run(capsys, "--topology")
    assert "*––►[ 0]◄––►[ 1]◄––►[ 2]◄––►[ 3]◄––*" in out


def test_visible_cores_and_lnc(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_NEURONX_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "1")
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", "2-5")
    chips = json.loads(_run(capsys, "-j")[1])
    assert [(c["neuron_device"], c["neuroncore_ids"], c["logical_neuroncore_config"]) for c in chips] == \
        [(0, [2, 3, 4, 5], 1)]


def test_processes_with_show_all_procs_and_wide(capsys, worker, use_runtime_dir):
    code, out, _ = _run(capsys, "-a")
    assert code == 0 and f"| {worker.pid} " in out and "torch-neuronx" in out
    code, out, _ = _run(capsys, "--wide")
    assert "RUNTIME" in out and "CORE IDS" not in out and str(worker.pid) in out
    chips = json.loads(_run(capsys, "-j")[1])
    procs = chips[0]["neuron_processes"]
    assert [p["pid"] for p in procs] == [worker.pid]
    assert set(procs[0]) == {"pid", "command", "neuron_runtime_version"}


def test_bad_input(capsys, monkeypatch):
    with pytest.raises(SystemExit) as exc:
        ls.main(["--bogus"])
    assert exc.value.code == 2 and "usage: neuron-ls" in capsys.readouterr().err
    monkeypatch.setenv("TORCH_NEURONX_INSTANCE_TYPE", "trn9.huge")
    code, _, err = _run(capsys)
    assert code == 1 and "TORCH_NEURONX_INSTANCE_TYPE" in err and "Traceback" not in err
