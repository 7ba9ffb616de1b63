"""nki-rmsnorm (neuron build): RMSNorm as an NKI kernel for device="neuron" tensors.

    kernel = kernels.get_local_kernel(Path("examples/nki_kernel_repo"))
    y = kernel.rms_norm(x, weight, eps)                 # x [..., D] on neuron
    kernelize(model, device="neuron", mode=Mode.INFERENCE) with layer "RMSNorm"
"""
from . import layers
from ._ops import rms_norm
from .nki_kernels import rmsnorm_fwd

__all__ = ["layers", "rms_norm", "rmsnorm_fwd", "BACKEND"]
BACKEND = "neuron"
