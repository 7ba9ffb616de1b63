"""The dry run's report lists the ops TorchNeuron would run on the host CPU (or not at all) per
call site, as it lists host syncs, and adds their estimated cost to the time breakdown."""
import pytest
import torch

from torch_neuronx import plan


def _script(x):
    for _ in range(3):
        x = x - torch.kthvalue(x, 3, dim=-1, keepdim=True).values    # CPU_FALLBACK, 3 calls at one line
    m = torch.median(x)                                               # CPU_FALLBACK, 1 call
    q = torch.quantize_per_tensor(x, 0.1, 0, torch.qint8)             # N: not supported by TorchNeuron
    return m, q


def test_report_lists_fallback_ops_per_call_site():
    x = torch.randn(32, 256, device="neuron")
    with pytest.warns(UserWarning, match="quantize"), plan.dry_run() as run:
        _script(x)
    r = run.report()
    rows = {(row["op"], row["status"]): row for row in r["cpu_fallbacks"]}
    norm = rows[("aten::kthvalue", "CPU_FALLBACK")]
    assert norm["count"] == 3 and norm["dtypes"] == ["float32"]
    assert norm["site"].endswith("test_fallback_sites.py:11")
    assert rows[("aten::median", "CPU_FALLBACK")]["site"].endswith("test_fallback_sites.py:12")
    assert r["cpu_fallbacks"][0]["status"] == "N"                    # what fails on Trainium comes first
    assert r["cpu_fallbacks"][0]["op"] == "aten::quantize_per_tensor"
    # the estimate charged each CPU fallback call; the breakdown carries it apart from device time
    charged = [e for e in run.estimate.events if e.category == "cpu_fallback"]
    assert len(charged) == 4
    assert r["time_by_bound_s"]["cpu_fallback_s"] == pytest.approx(sum(e.seconds for e in charged), rel=1e-12)
    md = run.markdown()
    assert "## CPU fallbacks: 5 op calls" in md
    assert "**1 op calls are not supported by TorchNeuron (N)**" in md
    assert "| aten::kthvalue | CPU_FALLBACK | float32 | 3 |" in md


def test_no_fallbacks_no_section():
    x = torch.randn(32, 256, device="neuron")
    with plan.dry_run() as run:
        x / x.pow(2).sum(-1, keepdim=True).sqrt()
    r = run.report()
    assert r["cpu_fallbacks"] == [] and r["time_by_bound_s"]["cpu_fallback_s"] == 0.0
    assert "CPU fallbacks" not in run.markdown()
