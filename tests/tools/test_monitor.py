"""neuron-monitor: the JSON report's schema and values, config handling."""
from __future__ import annotations

import json

import pytest

from torch_neuronx.tools import monitor
from torch_neuronx.tools.api.devices import instance_view

from .conftest import samples_around_work


def test_report_schema_and_worker_values(worker, runtime_dir):
    before, after = samples_around_work(runtime_dir, worker.pid)
    report = monitor.build_report(instance_view(), before, after)
    assert set(report) == {"neuron_runtime_data", "system_data", "instance_info", "neuron_hardware_info"}
    rt = next(r for r in report["neuron_runtime_data"] if r["pid"] == worker.pid)
    assert set(rt["report"]) == {"neuroncore_counters", "execution_stats", "memory_used",
                                 "neuron_runtime_vcpu_usage"}
    core0 = rt["report"]["neuroncore_counters"]["neuroncores_in_use"]["0"]
    assert 0 < core0["neuroncore_utilization"] <= 100
    assert set(core0["v3d"]) == {"nc_v3.0", "nc_v3.1"}  # trn2 at LNC=2
    assert rt["report"]["execution_stats"]["execution_summary"]["completed"] > 0
    mem = rt["report"]["memory_used"]["neuron_runtime_used_bytes"]
    assert mem["usage_breakdown"]["neuroncore_memory_usage"]["1"]["tensors"] == 1 << 20
    hw = report["neuron_hardware_info"]
    assert (hw["neuron_device_type"], hw["neuroncore_version"], hw["logical_neuroncore_config"]) == \
        ("trainium2", "v3d", 2)
    assert set(report["system_data"]) == {"neuron_hw_counters", "vcpu_usage", "memory_info"}
    assert report["system_data"]["memory_info"]["memory_total_bytes"] > 0


def test_main_prints_one_json_document_per_period(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_RUNTIME_DIR", str(tmp_path / "empty"))  # no processes: empty list
    config = tmp_path / "monitor.json"
    config.write_text(json.dumps({"period": "100ms"}))
    assert monitor.main(["-c", str(config), "-n", "2"]) == 0
    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(docs) == 2 and all(d["neuron_runtime_data"] == [] for d in docs)


@pytest.mark.parametrize("content,needle", [("{not json", "not JSON"), ('{"period": "soon"}', "not a duration"),
                                            ("[1]", "JSON object")])
def test_bad_config(tmp_path, capsys, content, needle):
    config = tmp_path / "c.json"
    config.write_text(content)
    assert monitor.main(["-c", str(config), "-n", "1"]) == 1
    assert needle in capsys.readouterr().err
    assert monitor.main(["-c", str(tmp_path / "missing.json")]) == 1
    with pytest.raises(SystemExit):
        monitor.main(["--period"])
