"""`python -m torch_neuronx.plan run --nproc-per-node N --nnodes M`: a 32-rank TP4 x FSDP8 job on two
trn2.48xlarge nodes plans with two processes (ranks 0 and 31), each the fake group of the full world;
bad layouts stop with a message that names the fix."""
from __future__ import annotations

import os

import pytest

from torch_neuronx.plan.__main__ import main as plan_main
from torch_neuronx.plan.distributed import _launch as launch

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "tiny_tp_fsdp_train.py")


def _args(*flags):
    import argparse

    from torch_neuronx.plan import _run as run

    parser = argparse.ArgumentParser()
    run.add_arguments(parser)
    return parser.parse_args(list(flags))


def test_tp4_by_fsdp8_on_two_nodes_plans_with_two_processes(monkeypatch, tmp_path):
    monkeypatch.setenv("TP_SIZE", "4")
    monkeypatch.setenv("FSDP_SIZE", "8")
    args = _args("--nnodes", "2", "--nproc-per-node", "16", "--instance", "trn2.48xlarge",
                 "--json", str(tmp_path / "plan.json"))
    merged = launch.run(args, [SCRIPT])
    assert merged["world_size"] == 32 and merged["ranks_run"] == [0, 31]
    assert merged["dry_run"] and merged["fits"]
    peaks = merged["peak_hbm_bytes_per_core"]
    assert len(peaks) == 32 and min(peaks) > 0
    assert peaks[0] == peaks[31]                     # ranks alike, as the roles assume
    assert merged["represented_by"][5] == 31 and merged["represented_by"][0] == 0
    last = merged["ranks"]["31"]["distributed"]
    assert (last["rank"], last["local_rank"], last["node"], last["world_size"]) == (31, 15, 1, 32)
    assert len(last["step_ends_s"]) == 2 and merged["step_time_s"] > 0
    by_kind = merged["collectives_by_rank"]
    assert {k: v["count"] for k, v in by_kind["0"].items()} == {k: v["count"] for k, v in by_kind["31"].items()}
    # TP inside a chip's 4 cores of node 1, FSDP across every fourth rank of both nodes
    assert "28,29,30,31" in by_kind["31"]["all_reduce"]["groups"]
    assert ",".join(map(str, range(3, 32, 4))) in by_kind["31"]["all_gather"]["groups"]
    assert ",".join(map(str, range(3, 32, 4))) in by_kind["31"]["reduce_scatter"]["groups"]
    assert (tmp_path / "plan.json").exists()


def test_a_layout_the_script_rejects_names_the_rank_and_its_error(tmp_path):
    script = tmp_path / "mesh.py"
    script.write_text("import torch.distributed as dist\nfrom torch.distributed.device_mesh import init_device_mesh\n"
                      "dist.init_process_group('neuron')\ninit_device_mesh('neuron', (3, 2))\n")
    with pytest.raises(launch.LaunchError, match=r"(?s)rank 0 exited with code 1.*mesh"):
        launch.run(_args("--nproc-per-node", "4", "--ranks", "0"), [str(script)])


@pytest.mark.parametrize("flags,env,message", [
    (["--nproc-per-node", "0"], {}, "--nproc-per-node 0: must be at least 1"),
    (["--nproc-per-node", "4", "--nnodes", "0"], {}, "--nnodes 0: must be at least 1"),
    (["--nproc-per-node", "4"], {"TP_SIZE": "3", "FSDP_SIZE": "2"},
     "TP_SIZE x FSDP_SIZE = 3 x 2 = 6 does not match the world size"),
    (["--nproc-per-node", "8", "--instance", "trn2.3xlarge"], {}, "more ranks than trn2.3xlarge has"),
    (["--nproc-per-node", "4", "--ranks", "4"], {}, "outside the world of 4 ranks"),
], ids=["nproc-0", "nnodes-0", "tp-x-fsdp", "too-many-per-node", "rank-outside"])
def test_bad_layouts_stop_before_any_process_starts(flags, env, message, monkeypatch, capsys, tmp_path):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    script = tmp_path / "never_run.py"
    script.write_text("raise SystemExit('started')\n")
    assert plan_main(["run", *flags, "--", str(script)]) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert "started" not in err
