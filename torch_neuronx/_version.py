"""The package version, in one place (pyproject.toml reads it from here).

Scheme `<torch major>.<torch minor>.<release>.<build>`, as TorchNeuron's own
(`torch-neuronx==2.13.3.0` goes with PyTorch 2.13): the first two numbers are
the torch release the package targets and CI tests in full, so `pip show
torch-neuronx` tells at a glance which PyTorch it is for and that it is the
native backend (AWS's troubleshooting guide calls any version below 2.13 the
legacy XLA-based library). `<release>` counts this package's releases for that
torch; `<build>` counts rebuilds of one release.
"""

__version__ = "2.13.0.1"
