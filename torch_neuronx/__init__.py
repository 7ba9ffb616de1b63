"""torch-neuronx: the `neuron` device (AWS Trainium NeuronCores) for PyTorch.

`import torch` loads this package through the `torch.backends` entry point
(`_autoload`); `import torch_neuronx` does the same registration when autoload
is disabled (TORCH_DEVICE_BACKEND_AUTOLOAD=0).
"""
from __future__ import annotations

from ._version import __version__  # noqa: F401  (<torch major.minor>.<release>.<build>)


def _autoload() -> None:
    """Entry point of the `torch.backends` group, called by `import torch`.

    Defined before anything imports torch: `import torch_neuronx` on a fresh
    interpreter imports torch, whose autoload calls this function while this
    module is still initialising.
    """
    import torch  # noqa: F401  - first, so torch's own autoload can re-enter here

    from ._registration import register

    register()


_autoload()

from ._registration import registration_error  # noqa: E402
from .compiler import get_dynamo_metrics, reset_dynamo_metrics  # noqa: E402
from .nki_integration import nki_op, wrap_nki  # noqa: E402  (cheap: heavy parts load on use)
from .numerics import numerics_report  # noqa: E402  (TORCH_NEURONX_NUMERICS=check: where Trainium would differ)
from .runtime import host_info  # noqa: E402  (the host CPU and how its bf16/fp16 matmuls run)
from .tools.op_tracking import clear_op_tracking, get_executed_ops, get_fallback_ops  # noqa: E402


def get_host_kernel_calls() -> int:
    """Number of ATen ops the virtual NeuronCore executed through host kernels."""
    from . import _C

    return _C._host_kernel_calls()


def routed_ops() -> list[str]:
    """ATen ops sent to their CPU kernel instead of a composite decomposition."""
    from . import _C

    return list(_C._routed_ops())


def __getattr__(name: str):
    import importlib

    # `torch_neuronx.estimate(...)` loads the cost model on first use (not at `import torch`)
    if name in ("estimate", "neuron_dynamo_backend"):
        return importlib.import_module(f".{name}", __name__)
    # TorchNeuron's torch_neuronx.memory_allocated(), synchronize(), NeuronConfig, ...: the objects
    # themselves, from torch.neuron or their subpackage (_public_names.py)
    # (import_module: `from . import` would come back here first)
    value = importlib.import_module("._public_names", __name__).resolve(name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    import importlib

    names = importlib.import_module("._public_names", __name__).names()
    return sorted(set(globals()) | set(names) | {"estimate", "neuron_dynamo_backend"})
