"""The libraries detect neuron after a plain install, without `import torch_neuronx` and
without torch_xla; the adapters are in place before the libraries are used."""
from __future__ import annotations

import json

import pytest

from tests.conftest import run_python


@pytest.fixture(scope="module")
def plain_interpreter():
    """One fresh interpreter (one start instead of three): first, with no `import torch_neuronx` anywhere, what
    the libraries detect; then whether the adapters are already in place (installed by `import torch`, no
    user code); only then torch_neuronx.integrations.install() run again over a library module imported
    before it. Each part starts after the one before has printed, so it cannot change what that one saw."""
    r = run_python("""
        import importlib.util, json, sys
        from transformers.utils import is_torch_neuron_available
        from transformers.utils.import_utils import is_torch_neuroncore_available
        from accelerate.utils import is_neuron_available
        import accelerate
        from accelerate import PartialState
        print(json.dumps({
            "transformers": is_torch_neuron_available(),
            "transformers_check_device": is_torch_neuron_available(check_device=True),
            "accelerate": is_neuron_available(),
            "legacy_xla_path": is_torch_neuroncore_available(),
            "torch_xla_installed": importlib.util.find_spec("torch_xla") is not None,
            "torch_xla_imported": any(m == "torch_xla" or m.startswith("torch_xla.") for m in sys.modules),
            "accelerate_device": PartialState().device.type,
        }), flush=True)
        import accelerate.utils.modeling as m   # imported before install()
        import transformers.generation.utils as g
        import transformers.integrations.accelerate as ti
        print(json.dumps([getattr(m.get_max_memory, "_torch_neuronx", False),
                          getattr(ti.accelerate_max_memory, "_torch_neuronx", False),
                          getattr(g.GenerationMixin._valid_auto_compile_criteria, "_torch_neuronx", False)]),
              flush=True)
        import torch_neuronx.integrations as integ
        integ._installed = False
        integ.install()
        print(json.dumps({"reinstalled": getattr(m.get_max_memory, "_torch_neuronx", False)}))
    """)
    assert r.returncode == 0, r.stderr[-3000:]
    detected, adapters, reinstalled = (json.loads(line) for line in r.stdout.strip().splitlines()[-3:])
    return detected, adapters, reinstalled


def test_transformers_and_accelerate_detect_neuron_without_importing_the_plugin(plain_interpreter):
    got = plain_interpreter[0]
    assert got == {"transformers": True, "transformers_check_device": True, "accelerate": True,
                   "legacy_xla_path": False, "torch_xla_installed": False, "torch_xla_imported": False,
                   "accelerate_device": "neuron"}, got


def test_adapters_are_installed_by_import_torch(plain_interpreter):
    """device_map="auto" and the compile explanation need the adapters active with no user code."""
    assert plain_interpreter[1] == [True, True, True], (
        "torch_neuronx.integrations.install() is not called at registration: " + str(plain_interpreter[1]))


def test_adapter_installed_after_library_import_also_applies(plain_interpreter):
    assert plain_interpreter[2] == {"reinstalled": True}
