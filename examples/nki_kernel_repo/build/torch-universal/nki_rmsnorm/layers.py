import torch
from torch import nn


class RMSNorm(nn.Module):
    can_torch_compile = True
    has_backward = True

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        from . import rms_norm
        eps = getattr(self, "variance_epsilon", None)
        if eps is None:
            eps = getattr(self, "eps", 1e-6)
        return rms_norm(hidden_states, self.weight, float(eps))
