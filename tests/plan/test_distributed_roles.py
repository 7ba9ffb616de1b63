"""Which ranks a dry run starts for a layout, and which started rank stands in for the others:
one rank per pipeline stage (pipeline outermost, as torchrun/torchtitan/Megatron order ranks),
rank 0 and the last rank as before without pipeline stages (plan/distributed/_roles.py)."""
from __future__ import annotations

import pytest

from torch_neuronx.plan.distributed import _launch as launch, _roles as roles


def test_without_pipeline_stages_rank_0_and_the_last_run():
    assert roles.choose_ranks(32) == [0, 31]
    assert roles.choose_ranks(1) == [0]
    assert [roles.representative(r, [0, 31], world_size=32) for r in (0, 1, 17, 31)] == [0, 31, 31, 31]


def test_one_rank_runs_per_pipeline_stage_and_stands_in_for_its_stage():
    # TP4 x DP2 x PP4 = 32 ranks: stages of 8 ranks; TP and DP ranks of a stage are alike
    run = roles.choose_ranks(32, pp=4)
    assert run == [0, 8, 16, 31]
    assert [roles.stage_of(r, 32, 4) for r in run] == [0, 1, 2, 3]
    reps = [roles.representative(r, run, world_size=32, pp=4) for r in range(32)]
    assert reps == [0] * 8 + [8] * 8 + [16] * 8 + [31] * 8
    assert roles.choose_ranks(8, pp=2) == [0, 7]
    assert [roles.representative(r, [0, 7], world_size=8, pp=2) for r in (3, 4)] == [0, 7]


def test_a_stage_with_no_started_rank_takes_the_nearest_one():
    assert roles.representative(12, [0, 31], world_size=32, pp=4) == 31


@pytest.mark.parametrize("pp", [0, 3])
def test_pipeline_stages_that_do_not_divide_the_world_are_refused(pp):
    with pytest.raises(ValueError, match=rf"--pp {pp} .*must divide the world size 8: choose one of \[1, 2, 4, 8\]"):
        roles.choose_ranks(8, pp=pp)


def test_pp_size_from_the_environment():
    assert launch._pp(None, {"PP_SIZE": "4"}) == 4
    assert launch._pp(2, {"PP_SIZE": "4"}) == 2
    assert launch._pp(None, {}) == 1
    with pytest.raises(ValueError, match="PP_SIZE='x'"):
        launch._pp(None, {"PP_SIZE": "x"})
