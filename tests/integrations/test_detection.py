"""Item 1: the libraries detect neuron after a plain install, without `import torch_neuronx` and
without torch_xla; the adapters are in place before the libraries are used."""
from __future__ import annotations

import json

from tests.conftest import run_python


def test_transformers_and_accelerate_detect_neuron_without_importing_the_plugin():
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
        }))
    """)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got == {"transformers": True, "transformers_check_device": True, "accelerate": True,
                   "legacy_xla_path": False, "torch_xla_installed": False, "torch_xla_imported": False,
                   "accelerate_device": "neuron"}, got


def test_adapters_are_installed_by_import_torch():
    """device_map="auto" and the compile explanation need the adapters active with no user code."""
    r = run_python("""
        import accelerate.utils.modeling as m
        import transformers.generation.utils as g
        import transformers.integrations.accelerate as ti
        print(getattr(m.get_max_memory, "_torch_neuronx", False),
              getattr(ti.accelerate_max_memory, "_torch_neuronx", False),
              getattr(g.GenerationMixin._valid_auto_compile_criteria, "_torch_neuronx", False))
    """)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["True", "True", "True"], (
        "torch_neuronx.integrations.install() is not called at registration: " + r.stdout)


def test_adapter_installed_after_library_import_also_applies():
    r = run_python("""
        import os
        import accelerate.utils.modeling as m   # imported before install()
        import torch_neuronx.integrations as integ
        integ._installed = False
        integ.install()
        print(getattr(m.get_max_memory, "_torch_neuronx", False))
    """)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split()[-1] == "True"
