"""The hooks the distributed layer offers (torch_neuronx/distributed/hooks.py) and the registrations made
at startup: each hook does in a fresh process what the upward imports it replaced did (the dry run's fake
group, also when the dry run is switched on after startup; the estimate of each collective; Trainium
numerics of integer sums; Dynamo's skip list), and the planner is imported only when asked for."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from torch_neuronx.distributed import hooks

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str, **env) -> dict:
    """Run `code` in a fresh interpreter (startup registration included); it prints one JSON line last."""
    full_env = {k: v for k, v in os.environ.items()
                if not k.startswith(("TORCH_NEURONX_DRY_RUN", "TORCH_NEURONX_NUMERICS"))}
    full_env.update(env, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


_ONE_RANK = """
import json, os, sys
import torch, torch.distributed as dist
import torch_neuronx

def group():
    dist.init_process_group("neuron", store=dist.HashStore(), rank=0, world_size=1)
    return dist.distributed_c10d._get_default_group()

def all_reduce_estimated(value, dtype):
    x = torch.tensor([value], dtype=dtype, device="neuron")
    with torch_neuronx.estimate() as est:
        dist.all_reduce(x)
    kinds = [e.category for e in est.events if e.kind == "collective"]
    return x.item(), kinds
"""


def test_real_group_is_costed_and_the_planner_stays_unimported():
    out = _run(_ONE_RANK + """
pg = group()
value, kinds = all_reduce_estimated(3.0, torch.float32)
print(json.dumps({"group": type(pg).__name__, "value": value, "kinds": kinds,
                  "planner": "torch_neuronx.plan" in sys.modules}))
""")
    assert out == {"group": "ProcessGroupNeuron", "value": 3.0, "kinds": ["collective:all_reduce"],
                   "planner": False}


def test_dry_run_switched_on_after_startup_builds_the_fake_group():
    """The group factory reads the switch at each new group, as tests and plan.enable() need."""
    out = _run(_ONE_RANK + """
first = type(group()).__name__
dist.destroy_process_group()
os.environ["TORCH_NEURONX_DRY_RUN"] = "1"
pg = group()
value, kinds = all_reduce_estimated(3.0, torch.float32)
print(json.dumps({"before": first, "after": type(pg).__name__, "value": value, "kinds": kinds}))
""")
    assert out == {"before": "ProcessGroupNeuron", "after": "DryRunProcessGroup", "value": 3.0,
                   "kinds": ["collective:all_reduce"]}


@pytest.mark.parametrize("mode, expected", [("host", 2**24 + 1), ("trainium", 2**24)])
def test_integer_sums_follow_the_numerics_mode(mode, expected):
    """trainium: an int64 all_reduce runs through float32, which cannot hold 2^24 + 1 (host keeps it)."""
    out = _run(_ONE_RANK + """
group()
value, _ = all_reduce_estimated(2**24 + 1, torch.int64)
print(json.dumps({"value": value}))
""", TORCH_NEURONX_NUMERICS=mode)
    assert out == {"value": expected}


@pytest.mark.parametrize("dynamo_first", [False, True])
def test_the_process_group_joins_dynamos_skip_list_in_either_import_order(dynamo_first):
    out = _run(f"""
import json, os
import torch
import torch_neuronx
if {dynamo_first}:
    import torch._dynamo.trace_rules
import torch_neuronx.distributed.process_group
import torch._dynamo.trace_rules as trace_rules
folder = os.path.dirname(torch_neuronx.distributed.__file__)
print(json.dumps({{"skipped": any(os.path.normpath(d) == os.path.normpath(folder) for d in trace_rules.SKIP_DIRS)}}))
""")
    assert out == {"skipped": True}


@pytest.fixture
def saved_hooks():
    state = dict(hooks._state)
    observers, classes, pending = list(hooks._class_observers), list(hooks._group_classes), list(hooks._pending_imports)
    yield
    hooks._state.update(state)
    hooks._class_observers[:], hooks._group_classes[:], hooks._pending_imports[:] = observers, classes, pending


def test_an_observer_sees_classes_announced_before_and_after_it(saved_hooks):
    class Early:
        pass

    class Late:
        pass

    seen = []
    hooks.announce_group_class(Early)
    hooks.on_group_class(seen.append)
    hooks.on_group_class(seen.append)        # the same observer twice: once
    hooks.announce_group_class(Late)
    hooks.announce_group_class(Late)         # the same class twice: once
    assert seen[-2:] == [Early, Late] and seen.count(Early) == 1 and seen.count(Late) == 1


def test_imports_asked_for_before_a_watcher_are_handed_to_it(saved_hooks):
    hooks._state["import_watcher"] = None
    calls = []
    hooks.when_imported("json", lambda m: calls.append(("now", m.__name__)))     # already imported: runs now
    hooks.when_imported("no_such_module_yet", lambda m: calls.append(("later", m)))
    assert calls == [("now", "json")]
    hooks.set_import_watcher(lambda name, hook: calls.append(("watcher", name)))
    assert calls == [("now", "json"), ("watcher", "no_such_module_yet")] and not hooks._pending_imports


def test_without_numerics_the_transport_tensors_pass_unchanged(saved_hooks):
    hooks.set_collective_numerics(None)
    outputs, inputs = [object()], [object()]
    assert hooks.prepare_collective("all_reduce", None, outputs, inputs) == (outputs, inputs, None)


@pytest.mark.parametrize("register, argument", [
    (hooks.set_group_factory, "factory"), (hooks.on_group_class, "observer"),
    (hooks.set_collective_numerics, "prepare"), (hooks.set_import_watcher, "when_imported")])
def test_a_registration_that_is_not_callable_names_its_argument(saved_hooks, register, argument):
    with pytest.raises(TypeError, match=rf"{register.__name__}\({argument}\): expected a callable"):
        register("not a function")
