"""Every adapter installs whatever the import order, and accelerate training trains.

`import accelerate` (or `from trl import SFTTrainer`, `from transformers import Trainer`,
`import safetensors.torch`) as a script's first line imports torch from inside the very module an adapter
targets, so that module is half-initialised when torch_neuronx registers its hooks. Each order runs in a
fresh interpreter (tests/clients/programs/first_import.py); the mechanism itself is also checked in-process
on throwaway modules, including an import that fails and is retried.
"""
from __future__ import annotations

import importlib
import sys

import pytest

from tests.clients import harness
from torch_neuronx.integrations import _post_import

# first statement -> modules whose adapters it must have installed (those it imports torch from, and more)
ORDERS = {
    "import accelerate": ("accelerate.accelerator", "accelerate.state", "accelerate.utils.modeling"),
    "from trl import SFTTrainer": ("accelerate.accelerator", "accelerate.state", "transformers.trainer",
                                   "transformers.generation.utils"),
    "from transformers import Trainer": ("transformers.trainer", "transformers.generation.utils",
                                         "accelerate.accelerator"),
    "import safetensors.torch": ("safetensors.torch",),
}
TRAIN = ("import accelerate", "from trl import SFTTrainer")


@pytest.fixture(scope="module")
def runs() -> dict:
    orders = list(ORDERS)
    procs = harness.run_all([(harness.python("first_import.py", order, *(["--train"] if order in TRAIN else [])),
                              None) for order in orders])
    return {order: harness.result(proc) for order, proc in zip(orders, procs)}


@pytest.mark.parametrize("order", list(ORDERS))
def test_every_adapter_installed(runs, order):
    wrapped = runs[order]["wrapped"]
    for module in ORDERS[order]:
        seams = {seam: ok for seam, ok in wrapped.items() if seam.startswith(module + ".")}
        assert seams and all(seams.values()), (order, module, wrapped)
    assert all(wrapped.values()), (order, wrapped)


@pytest.mark.parametrize("order", TRAIN)
def test_optimizer_built_before_prepare_trains_like_cpu(runs, order):
    neuron, cpu = runs[order]["neuron"], runs[order]["cpu"]
    assert neuron["device"].startswith("neuron") and cpu["device"] == "cpu"
    assert neuron["same_parameters"], "model.to('neuron') replaced the Parameter objects"
    assert neuron["initial"] == cpu["initial"]
    changed = max(abs(a - b) for w, w0 in zip(neuron["weights"], neuron["initial"]) for a, b in zip(w, w0))
    assert changed > 1e-2, "the optimizer did not move the model's weights"
    diff = max(abs(a - b) for w, c in zip(neuron["weights"], cpu["weights"]) for a, b in zip(w, c))
    assert diff < 1e-6, diff


def _write(path, name: str, body: str) -> None:
    (path / f"{name}.py").write_text(body)


def test_hook_waits_for_a_module_mid_import(tmp_path, monkeypatch):
    """A hook registered while its module is executing runs once, after the body finished; an import that
    fails runs nothing, and the retried import runs the hook."""
    calls = []
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys.modules[__name__], "_calls", calls, raising=False)
    register = (f"import sys\nfrom torch_neuronx.integrations import _post_import\n"
                f"_post_import.when_imported(__name__, lambda m: sys.modules[{__name__!r}]._calls.append("
                f"(m.__name__, getattr(m, 'DONE', False))))\n")
    _write(tmp_path, "g_mid_import_ok", register + "DONE = True\n")
    _write(tmp_path, "g_mid_import_flaky", register + "import os\nif os.environ.get('G_FAIL') == '1':\n"
                                                      "    raise ImportError('first try fails')\nDONE = True\n")
    try:
        importlib.import_module("g_mid_import_ok")
        assert calls == [("g_mid_import_ok", True)]
        assert type(sys.modules["g_mid_import_ok"].__spec__).__name__ == "ModuleSpec"  # class given back

        monkeypatch.setenv("G_FAIL", "1")
        with pytest.raises(ImportError, match="first try fails"):
            importlib.import_module("g_mid_import_flaky")
        assert calls == [("g_mid_import_ok", True)]
        monkeypatch.setenv("G_FAIL", "0")
        importlib.import_module("g_mid_import_flaky")
        # the failed body registered a hook too: both run, after the successful body
        assert calls[1:] == [("g_mid_import_flaky", True)] * 2
    finally:
        for name in ("g_mid_import_ok", "g_mid_import_flaky"):
            sys.modules.pop(name, None)
            _post_import._hooks.pop(name, None)
