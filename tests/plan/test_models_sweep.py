"""plan sweep: one row per layout with its figures; layouts that cannot work say why in their row."""
from __future__ import annotations

import json

from torch_neuronx.plan.__main__ import main as plan_main


def test_sweep_rows(tiny_config_dir, plan_env, tmp_path, capsys):
    out = tmp_path / "rows.json"
    assert plan_main(["sweep", "--config", tiny_config_dir, "--instances", "trn2.3xlarge,trn9.xlarge", "--lnc", "2",
                       "--tp", "2,4", "--fsdp", "2", "--seq-len", "32", "--gradient-checkpointing", "0,1",
                       "--real", "--in-process", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [(r["instance"], r["tp"], r["gradient_checkpointing"]) for r in rows] == [
        (i, tp, ckpt) for i in ("trn2.3xlarge", "trn9.xlarge") for tp in (2, 4) for ckpt in (False, True)]
    plain, ckpt = rows[0], rows[1]
    for r in (plain, ckpt):
        assert r["fits"] is True and r["dp"] == 1 and r["step_time_s"] > 0
        assert r["tokens_per_s"] == r["global_batch"] * 32 / r["step_time_s"]
    # recomputing the forward in the backward costs time
    assert ckpt["step_time_s"] > plain["step_time_s"]
    assert all("= 8 does not divide the 4 NeuronCores" in r["reason"] for r in rows[2:4])  # TP4 x FSDP2
    assert all("not a known instance type" in r["reason"] for r in rows[4:])
    table = capsys.readouterr().out
    assert table.count("\n| trn") == 8 and "| yes |" in table and "not a known instance type" in table


def test_rows_in_their_own_processes_match_rows_planned_in_process(tiny_config_dir, plan_env, tmp_path):
    """Each row of a sweep runs `python -m torch_neuronx.plan train` in a child (plan/_child.py) started
    with the row's instance, LNC and dry run: the same figures as the row planned in this process."""
    common = ["sweep", "--config", tiny_config_dir, "--instances", "trn2.3xlarge", "--lnc", "2", "--tp", "2,3",
              "--fsdp", "1", "--seq-len", "16", "--real", "--quiet"]
    apart, here = tmp_path / "apart.json", tmp_path / "here.json"
    assert plan_main(common + ["--json", str(apart)]) == 0
    assert plan_main(common + ["--in-process", "--json", str(here)]) == 0
    rows, same = json.loads(apart.read_text()), json.loads(here.read_text())
    assert "does not divide" in rows[1]["reason"] and "error" not in rows[0], rows
    keys = ("dp", "fits", "step_time_s", "tokens_per_s", "mfu", "global_batch", "grad_accum_steps")
    assert {k: rows[0][k] for k in keys} == {k: same[0][k] for k in keys}


def test_a_row_past_its_timeout_says_so(tiny_config_dir, plan_env, tmp_path):
    out = tmp_path / "rows.json"
    assert plan_main(["sweep", "--config", tiny_config_dir, "--instances", "trn2.3xlarge", "--lnc", "2", "--tp", "2",
                      "--real", "--quiet", "--row-timeout", "0.5", "--json", str(out)]) == 0
    assert json.loads(out.read_text())[0]["error"] == "plan did not finish in --row-timeout 0.5 s"


def test_context_parallel_rows(tiny_config_dir, plan_env, tmp_path):
    """--cp is a list like the others: CP 2 x FSDP 2 plans, and a sequence 2 x CP does not divide says
    why in its row (the same check as `plan train`)."""
    out = tmp_path / "rows.json"
    assert plan_main(["sweep", "--config", tiny_config_dir, "--instances", "trn2.3xlarge", "--lnc", "2", "--tp", "1",
                      "--cp", "1,2", "--fsdp", "2", "--seq-len", "32,18", "--real", "--in-process", "--quiet",
                      "--json", str(out)]) == 0
    rows = {(r["cp"], r["seq_len"]): r for r in json.loads(out.read_text())}
    assert rows[(2, 32)]["fits"] is True and rows[(2, 32)]["dp"] == 1 and rows[(2, 32)]["step_time_s"] > 0
    assert rows[(1, 32)]["dp"] == 2          # the cores CP does not take are data-parallel
    assert "--seq-len 18 must be a multiple of 2 x --cp = 4" in rows[(2, 18)]["reason"]
    assert "reason" not in rows[(1, 18)]
