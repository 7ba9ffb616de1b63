"""One report model for the plan's three kinds of report (plan/report_model.py): real reports of a
dry run, a merge of two ranks and a model-level command go through `to_json`/`from_json` unchanged,
and reports with the earlier key names (schema 1) read as the new ones, in Python and in
`python -m torch_neuronx.plan html OLD.json`."""
from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest
import torch

from torch_neuronx import plan
from torch_neuronx.plan import _html_report as html_report
from torch_neuronx.plan.distributed._merge import markdown, merge
from torch_neuronx.plan.report_model import RENAMED, SCHEMA_VERSION, PlanReport, normalized
from torch_neuronx.runtime.units import size

COMMON = ("schema_version", "kind", "dry_run", "instance", "lnc", "fits", "peak_hbm_bytes_per_core",
          "hbm_capacity_bytes_per_core", "headroom_bytes_per_core", "oom")


def _rank_report() -> dict:
    m = torch.nn.Linear(64, 64).to("neuron")
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with plan.dry_run() as run:
        for _ in range(2):
            m(torch.randn(8, 64, device="neuron")).sum().backward()
            opt.step()
    return json.loads(json.dumps(run.report(), default=str))   # as the --json file holds it


def _as_version_1(report: dict) -> dict:
    """The report as schema 1 wrote it: earlier names, no `kind` (and a merged report's ranks too)."""
    old_names = {new: old for old, new in RENAMED.items()}
    out = {old_names.get(k, k): v for k, v in report.items() if k != "kind"}
    out["schema_version"] = 1
    if "ranks" in out:
        out["ranks"] = {r: _as_version_1(rank) for r, rank in out["ranks"].items()}
    return out


@pytest.fixture(scope="module")
def rank_report():
    return _rank_report()


def test_rank_report_round_trip_and_version_1(rank_report):
    r = rank_report
    assert r["schema_version"] == SCHEMA_VERSION == 2 and r["kind"] == "rank"
    assert list(r)[:len(COMMON)] == list(COMMON)
    assert not set(RENAMED) & set(r)                      # no earlier name is written
    assert r["headroom_bytes_per_core"] == min(c["headroom_bytes"] for c in r["cores"])
    model = PlanReport.from_json(r)
    assert (model.kind, model.fits, model.peak_hbm_bytes_per_core) == ("rank", True, r["peak_hbm_bytes_per_core"])
    assert model.details["time_by_bound_s"] == r["time_by_bound_s"]
    assert model.to_json() == r
    old = _as_version_1(r)
    assert "phantom_memory" in old and "time_breakdown" in old and "headroom_bytes" in old
    assert PlanReport.from_json(old).to_json() == r
    assert html_report.render(old) == html_report.render(r)


def test_merged_report_reads_version_1_ranks(rank_report):
    second = copy.deepcopy(rank_report)
    second["distributed"]["rank"] = 1
    merged = merge({0: rank_report, 1: _as_version_1(second)}, world_size=2, nnodes=1, nproc_per_node=2)
    assert merged["kind"] == "merged" and merged["schema_version"] == SCHEMA_VERSION
    assert merged["dry_run"] is rank_report["dry_run"]
    assert merged["peak_hbm_bytes_per_core"] == [rank_report["peak_hbm_bytes_per_core"]] * 2
    assert merged["headroom_bytes_per_core"] == (rank_report["hbm_capacity_bytes_per_core"]
                                                 - rank_report["peak_hbm_bytes_per_core"])
    assert merged["ranks"]["1"]["time_by_bound_s"] == rank_report["time_by_bound_s"]
    assert PlanReport.from_json(merged).to_json() == merged
    md = markdown(merged).splitlines()            # what `plan run --nproc-per-node 2` prints
    peak = size(rank_report["peak_hbm_bytes_per_core"])
    assert "| rank | as | peak HBM / core | capacity | step time | collectives |" in md
    assert "|---:|---:|---:|---:|---:|---:|" in md and any(ln.startswith(f"| 1 | 1 | {peak} | ") for ln in md)
    assert any(ln.startswith("fits: yes; headroom ") and "on the fullest core" in ln for ln in md)
    old = _as_version_1(merged)
    assert normalized(old) == merged
    assert html_report.render(old) == html_report.render(merged)


def test_model_report_and_the_html_command_on_a_version_1_file(tiny_config_dir, plan_env, tmp_path):
    from torch_neuronx.plan.__main__ import main

    # --real: in this process (a dry run re-executes the command in a process of its own)
    out = tmp_path / "train.json"
    assert main(["train", "--config", tiny_config_dir, "--tp", "2", "--micro-batch", "1", "--global-batch", "2",
                       "--seq-len", "16", "--instance", "trn2.3xlarge", "--lnc", "2", "--real", "--json", str(out)]) == 0
    r = json.loads(out.read_text())
    assert r["kind"] == "model" and r["schema_version"] == SCHEMA_VERSION and list(r)[:len(COMMON)] == list(COMMON)
    assert r["headroom_bytes_per_core"] == r["hbm_capacity_bytes_per_core"] - r["peak_hbm_bytes_per_core"]
    assert PlanReport.from_json(r).to_json() == r
    old = {k: v for k, v in r.items() if k not in ("kind", "schema_version")}   # unversioned, as it was written
    old_path = tmp_path / "old.json"
    old_path.write_text(json.dumps(old))
    for path, page in ((out, tmp_path / "new.html"), (old_path, tmp_path / "old.html")):
        p = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "html", str(path), "-o", str(page)],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
    assert (tmp_path / "old.html").read_text() == (tmp_path / "new.html").read_text()


def test_bad_reports_say_what_is_wrong(rank_report):
    with pytest.raises(ValueError, match="schema_version=3: .* up to version 2"):
        PlanReport.from_json({**rank_report, "schema_version": 3})
    with pytest.raises(ValueError, match="not a plan report: it has neither"):
        PlanReport.from_json({"hello": 1})
    broken = {k: v for k, v in rank_report.items() if k != "fits"}
    with pytest.raises(ValueError, match="of kind 'rank'.* lacks fits"):
        PlanReport.from_json(broken)
    with pytest.raises(ValueError, match="kind='node'"):
        PlanReport.from_json({**rank_report, "kind": "node"})
    with pytest.raises(TypeError, match="JSON object, not list"):
        PlanReport.from_json([rank_report])
