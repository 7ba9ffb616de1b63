"""Layers for kernels.kernelize: stateless forwards that use the replaced module's
``weight`` and ``variance_epsilon`` (the Hugging Face LlamaRMSNorm convention)."""
import torch
from torch import nn

from ._ops import rms_norm


class RMSNorm(nn.Module):
    can_torch_compile = True
    has_backward = True

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        eps = getattr(self, "variance_epsilon", None)
        if eps is None:
            eps = getattr(self, "eps", 1e-6)
        return rms_norm(hidden_states, self.weight, float(eps))
