"""One dry-run session: a timed region is an estimate inside the dry run's own (each op costed once,
both receive it), one step clock for every step count, and a model-level report whose notes list
exactly its `unmodelled_ops` while the dry run's own estimate holds the timed step's collectives."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import torch_neuronx
from torch_neuronx import plan
from torch_neuronx.estimate import _mode as mode_mod
from torch_neuronx.estimate import recorders


@pytest.fixture
def op_costings(monkeypatch):
    calls = [0]
    op = mode_mod.op_estimate

    def counted(*args, **kwargs):
        calls[0] += 1
        return op(*args, **kwargs)

    monkeypatch.setattr(mode_mod, "op_estimate", counted)
    return calls


def _step(model, opt, x):
    model(x).square().mean().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def _model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to("neuron")
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3), torch.randn(16, 32, device="neuron")


def test_a_region_of_a_dry_run_costs_each_op_once(op_costings):
    model, opt, x = _model()
    _step(model, opt, x)   # the optimizer state exists: every step below runs the same ops
    with torch_neuronx.estimate("trn2.3xlarge") as alone:
        _step(model, opt, x)
    per_step = op_costings[0]
    op_costings[0] = 0
    with plan.dry_run("trn2.3xlarge") as run:
        _step(model, opt, x)
        with run.region("step", torch_neuronx.estimate("trn2.3xlarge")) as region:
            assert recorders.active() == (run.estimate, region)
            _step(model, opt, x)
    assert op_costings[0] == 2 * per_step                     # two steps, each op costed once
    assert run.regions == {"step": region}
    assert [(e.name, e.seconds) for e in region.events] == [(e.name, e.seconds) for e in alone.events]
    assert [e.name for e in run.estimate.events] == 2 * [e.name for e in alone.events]
    assert recorders.active() == ()


def test_one_step_clock_counts_the_steps_for_every_reader():
    from torch.optim import optimizer as optim_mod

    model, opt, x = _model()
    hooks = len(optim_mod._global_optimizer_post_hooks), len(optim_mod._global_optimizer_pre_hooks)
    with plan.dry_run("trn2.3xlarge") as run:
        assert (len(optim_mod._global_optimizer_post_hooks), len(optim_mod._global_optimizer_pre_hooks)) \
            == (hooks[0] + 1, hooks[1] + 1)                   # one pair of hooks for the whole session
        ends = []
        for _ in range(3):
            _step(model, opt, x)
            ends.append(run.estimate.total_s)
        assert run.memory.where()["step"] == 4                # the memory breakdown reads the same clock
    assert (len(optim_mod._global_optimizer_post_hooks), len(optim_mod._global_optimizer_pre_hooks)) == hooks
    report = run.report()
    assert run.optimizer_steps == report["optimizer_steps"] == 3
    assert run.steps.ends_s == ends == report["distributed"]["step_ends_s"]
    assert report["distributed"]["step_time_s"] == pytest.approx((ends[2] - ends[0]) / 2)


def test_a_region_needs_its_dry_run_running():
    run = plan.dry_run("trn2.3xlarge")
    with pytest.raises(RuntimeError, match="region 'step': this dry run is not running"):
        with run.region("step", torch_neuronx.estimate("trn2.3xlarge")):
            pass


def test_model_level_report_notes_agree_and_the_dry_run_holds_every_collective(tiny_config_dir, tmp_path):
    out = tmp_path / "train.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_NEURONX_PLAN_", "TORCH_NEURONX_DRY_RUN",
                                                                      "TORCH_NEURONX_INSTANCE_TYPE", "NEURON_LOGICAL"))}
    p = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "train", "--config", tiny_config_dir,
                        "--instance", "trn2.3xlarge", "--lnc", "2", "--tp", "2", "--seq-len", "32", "--quiet",
                        "--json", str(out)], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    report = json.loads(out.read_text())
    dry = json.loads((tmp_path / "train.dryrun.json").read_text())   # the session's own report
    noted = [n["text"] for n in report["notes"] if n["kind"] == "unmodelled op"]
    assert sorted(noted) == report["unmodelled_ops"] == dry["unmodelled_ops"]
    # the dry run's estimate got the timed step's collectives too: the warm-up step and the timed
    # step run the same ones
    timed = report["collectives"]
    assert timed["all_reduce"]["count"] > 0
    for kind, row in timed.items():
        assert dry["distributed"]["collectives"][kind]["count"] == 2 * row["count"], kind
    # its step clock ends the second step at the end of the timed step: that step's time, less the
    # launches the session's stream hides behind the warm-up step's queued work (the timed region
    # starts with an empty queue, so its launches wait; at most all of them are hidden)
    ends = dry["distributed"]["step_ends_s"]
    hidden = report["step_time_s"] - (ends[1] - ends[0])
    assert len(ends) == 2 and -1e-9 <= hidden <= report["time_breakdown_s"]["launch"] + 1e-9


def test_the_step_clock_counts_an_optimizer_inside_another_and_grouped_optimizers_once():
    import torch

    from torch_neuronx.plan._steps import StepClock

    class _Est:
        total_s = 0.0

    class Wrapper(torch.optim.Optimizer):   # steps an inner optimizer inside its own step, as ZeRO does
        def __init__(self, params):
            self.inner = torch.optim.SGD(params, lr=0.1)
            super().__init__(self.inner.param_groups, {})

        def step(self, closure=None):
            self.inner.step()

    w = torch.nn.Parameter(torch.ones(2))
    w.grad = torch.ones(2)
    clock = StepClock(_Est())
    clock.start()
    try:
        Wrapper([w]).step()
        assert clock.done == 1
        a, b = torch.optim.SGD([w], lr=0.1), torch.optim.SGD([w], lr=0.1)
        with clock.one_step():
            a.step()
            b.step()
        assert clock.done == 2 and len(clock.ends_s) == 2 and clock.in_optimizer == 0
    finally:
        clock.stop()
