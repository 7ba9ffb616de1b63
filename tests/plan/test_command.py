"""The planner's one command layer (plan/_command.py): the child environment every plan command
starts its children with, and that no other module builds one."""
from __future__ import annotations

import ast
from pathlib import Path

from torch_neuronx.plan import _command as command

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "torch_neuronx" / "plan"

BASE = {"TORCH_NEURONX_DRY_RUN_TRACE": "/old/trace.json", "TORCH_NEURONX_DRY_RUN_REPORT": "/old/report.json",
        "NEURON_LOGICAL_NC_CONFIG": "1", "PATH": "/bin"}


def test_a_dry_run_child_gets_the_runtime_settings_it_starts_with():
    env = command.child_environment(instance="trn2.48xlarge", lnc=2, report="/r.json", trace="/t.json",
                                    view=(True, False), base=BASE)
    assert env["TORCH_NEURONX_INSTANCE_TYPE"] == "trn2.48xlarge" and env["NEURON_LOGICAL_NC_CONFIG"] == "2"
    assert env["TORCH_NEURONX_DRY_RUN"] == "1"
    assert env["TORCH_NEURONX_DRY_RUN_REPORT"] == "/r.json" and env["TORCH_NEURONX_DRY_RUN_TRACE"] == "/t.json"
    assert env["TORCH_NEURONX_PLAN_QUIET"] == "1" and env["TORCH_NEURONX_PLAN_VERBOSE"] == "0"
    assert env["TORCH_NEURONX_PLAN_CHILD"].isdigit() and env["PATH"] == "/bin"


def test_what_a_child_is_not_given_is_inherited_or_removed():
    """No instance or LNC: as this process has them; no trace: none (a trace is asked for per
    command); no report: the one the user set; a real run: no dry-run switch at all."""
    env = command.child_environment(base=BASE)
    assert "TORCH_NEURONX_INSTANCE_TYPE" not in env and env["NEURON_LOGICAL_NC_CONFIG"] == "1"
    assert "TORCH_NEURONX_DRY_RUN_TRACE" not in env
    assert env["TORCH_NEURONX_DRY_RUN_REPORT"] == "/old/report.json"
    real = command.child_environment(dry_run=False, base={**BASE, "TORCH_NEURONX_DRY_RUN": "1"})
    assert "TORCH_NEURONX_DRY_RUN" not in real
    assert "TORCH_NEURONX_PLAN_QUIET" not in real   # the child's own flags say how it shows itself


def test_one_process_sees_the_cores_it_can_address(monkeypatch):
    """trn3.48xlarge at LNC=1 has more logical cores than one process addresses; trn2 does not."""
    from torch_neuronx.runtime.topology import MAX_VISIBLE_CORES

    monkeypatch.delenv("NEURON_RT_VISIBLE_CORES", raising=False)
    monkeypatch.delenv("NEURON_RT_NUM_CORES", raising=False)
    env = command.child_environment(instance="trn3.48xlarge", lnc=1, one_process=True, base={})
    assert env["NEURON_RT_VISIBLE_CORES"] == f"0-{MAX_VISIBLE_CORES - 1}"
    assert "NEURON_RT_VISIBLE_CORES" not in command.child_environment(instance="trn2.48xlarge", lnc=2,
                                                                      one_process=True, base={})
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", "0-3")   # the user's restriction stays theirs
    assert "NEURON_RT_VISIBLE_CORES" not in command.child_environment(instance="trn3.48xlarge", lnc=1,
                                                                      one_process=True, base={})


def test_a_model_plan_report_goes_beside_its_json(monkeypatch):
    monkeypatch.delenv("TORCH_NEURONX_DRY_RUN_REPORT", raising=False)
    assert command.report_beside("/x/plan.json") == "/x/plan.dryrun.json"
    monkeypatch.setenv("TORCH_NEURONX_DRY_RUN_REPORT", "/mine.json")
    assert command.report_beside("/x/plan.json") is None


def _child_environment_builders() -> list[str]:
    """Product modules other than _command.py that call `environment(...)` of _child.py or put the
    dry-run switch into a mapping themselves."""
    found = []
    for path in (ROOT / "torch_neuronx").rglob("*.py"):
        if path.name == "_command.py" and path.parent == PLAN:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            calls_child = (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                           and node.func.attr == "environment" and isinstance(node.func.value, ast.Name)
                           and node.func.value.id == "child")
            sets_switch = isinstance(node, ast.Dict) and any(
                isinstance(k, ast.Constant) and k.value == "TORCH_NEURONX_DRY_RUN" for k in node.keys)
            if calls_child or sets_switch:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_only_the_command_layer_builds_a_child_environment():
    assert _child_environment_builders() == [], "build a plan child's environment with plan/_command.py child_environment"
