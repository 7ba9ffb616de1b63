"""Autoload: `import torch` alone brings the neuron device; opt-out works."""
from tests.conftest import run_python


def test_import_torch_alone_gives_neuron_device():
    r = run_python("""
        import sys, torch
        x = torch.ones(2, device="neuron")
        assert "torch_neuronx" in sys.modules
        print(x.device, torch.neuron.is_available(), torch.accelerator.current_accelerator().type)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["neuron:0", "True", "neuron"]


def test_autoload_disabled_then_explicit_import():
    r = run_python("""
        import sys, torch
        assert "torch_neuronx" not in sys.modules
        assert not hasattr(torch, "neuron")
        import torch_neuronx
        print(torch.ones(1, device="neuron").device)
    """, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "neuron:0"


def test_broken_core_never_breaks_import_torch(tmp_path):
    # A torch_neuronx whose C++ core cannot load: import torch must still work,
    # torch.neuron.is_available() is False and a warning says why.
    import os, shutil
    import torch, torch_neuronx
    src = os.path.dirname(torch_neuronx.__file__)
    dst = tmp_path / "torch_neuronx"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    import neuron_hardware  # the hardware table torch_neuronx's runtime reads
    shutil.copytree(os.path.dirname(neuron_hardware.__file__), tmp_path / "neuron_hardware",
                    ignore=shutil.ignore_patterns("__pycache__"))
    import sysconfig
    (dst / ("_C" + sysconfig.get_config_var("EXT_SUFFIX"))).write_bytes(b"not an ELF file")
    # -S skips site's .pth files (the editable install's finder), so the broken
    # copy on PYTHONPATH is the torch_neuronx that `import torch` autoloads.
    site_packages = os.path.dirname(os.path.dirname(torch.__file__))
    r = run_python("""
        import warnings
        warnings.simplefilter("always")
        import torch
        import torch_neuronx
        print(torch.neuron.is_available(), torch_neuronx.registration_error() is not None)
        print(torch.ones(2).sum().item())
    """, env={"PYTHONPATH": os.pathsep.join([str(tmp_path), site_packages])}, flags=("-S",),
       cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "True", "2.0"]
    assert "could not register the neuron device" in r.stderr


def test_invalid_environment_does_not_break_import_torch():
    r = run_python("""
        import warnings
        warnings.simplefilter("always")
        import torch
        print(torch.neuron.is_available())
        try:
            torch.ones(1, device="neuron")
        except RuntimeError as e:
            print("raised", "NEURON_RT_VISIBLE_CORES" in str(e))
    """, env={"NEURON_RT_VISIBLE_CORES": "zero"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "raised", "True"]
    assert "NEURON_RT_VISIBLE_CORES" in r.stderr


def test_import_torch_neuronx_first():
    r = run_python("""
        import torch_neuronx
        import torch
        print(torch.ones(1, device="neuron").device, callable(torch_neuronx.nki_op))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["neuron:0", "True"]
