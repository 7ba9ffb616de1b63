"""The version says which torch the package targets, as TorchNeuron's 2.13.x / 2.14.x, in one place."""
import os
import re
import subprocess
import sys

import torch

import torch_neuronx

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_version_leads_with_the_targeted_torch_release():
    assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+", torch_neuronx.__version__), torch_neuronx.__version__
    major, minor = (int(p) for p in torch_neuronx.__version__.split(".")[:2])
    # TorchNeuron's troubleshooting guide: below 2.13 is the legacy XLA library
    assert (major, minor) >= (2, 13)
    # the targeted release is the lowest torch pyproject accepts (CI tests it in full)
    with open(os.path.join(REPO, "pyproject.toml")) as f:
        pyproject = f.read()
    assert f'"torch>={major}.{minor},' in pyproject


def test_pyproject_reads_the_one_constant():
    from setuptools.config.pyprojecttoml import read_configuration

    config = read_configuration(os.path.join(REPO, "pyproject.toml"))
    assert config["project"]["version"] == torch_neuronx.__version__


def test_neuron_ls_version_matches():
    out = subprocess.run([sys.executable, "-m", "torch_neuronx.tools.ls", "--version"], capture_output=True,
                         text=True, check=True, env={**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}).stdout
    assert out.strip() == f"neuron-ls (torch-neuronx {torch_neuronx.__version__}, virtual runtime)"


def test_process_page_reports_the_same_version():
    from torch_neuronx.tools.api.registry import list_processes

    torch.ones(1, device="neuron")  # the page is created on first use
    mine = [e for e in list_processes() if e.pid == os.getpid()]
    assert mine and mine[0].runtime_version == f"torch-neuronx {torch_neuronx.__version__} (virtual)"
