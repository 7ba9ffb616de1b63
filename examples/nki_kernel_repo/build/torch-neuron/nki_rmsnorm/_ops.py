"""The kernel as a torch custom op (eager, autograd, torch.compile), on the neuron device."""
import torch

try:
    from torch_neuronx import nki_op
except ImportError:  # torch-neuronx builds that do not re-export it at top level
    from torch_neuronx.nki_integration import nki_op

from .nki_kernels import rmsnorm_fwd

# Ops live in a namespace named after this build (the module name is the metadata id).
_NS = __name__.rsplit(".", 1)[0].lstrip("_") or "nki_rmsnorm"


def _define():
    from torch._library.custom_ops import OPDEFS
    existing = OPDEFS.get(f"{_NS}::rms_norm")
    if existing is not None:               # the same build loaded twice in one process
        return existing

    @nki_op(f"{_NS}::rms_norm", mutates_args=())
    def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        shape = x.shape
        y = rmsnorm_fwd(x.reshape(-1, shape[-1]).contiguous(), weight.contiguous(), eps)
        return y.reshape(shape)

    def setup_context(ctx, inputs, output):
        x, weight, eps = inputs
        ctx.save_for_backward(x, weight)
        ctx.eps = eps

    def backward(ctx, grad):
        # d/dx of x * r * w with r = (mean(x^2) + eps)^-1/2, in fp32.
        x, weight = ctx.saved_tensors
        xf, gf, wf = x.float(), grad.float(), weight.float()
        r = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + ctx.eps)
        gw = gf * wf
        dx = r * gw - xf * r.pow(3) * (gw * xf).mean(-1, keepdim=True)
        dw = (gf * xf * r).reshape(-1, x.shape[-1]).sum(0)
        return dx.to(x.dtype), dw.to(weight.dtype), None

    rms_norm.register_autograd(backward, setup_context=setup_context)
    return rms_norm


rms_norm = _define()
