"""Hub kernels on the neuron device, offline: load the NKI RMSNorm kernel repository shipped
in examples/nki_kernel_repo with Hugging Face `kernels` and swap a model's RMSNorm for it.

    pip install "kernels==0.17.2"
    HF_HUB_OFFLINE=1 python examples/nki_rmsnorm_hub.py

1. `get_local_kernel(path)` picks build/torch-neuron/ (not torch-universal) because
   `torch.neuron` exists; `backend="cpu"` gets the universal build.
2. `LOCAL_KERNELS="<repo_id>=<path>"` makes `get_kernel(repo_id, version=1)` resolve locally.
3. `kernelize(model, device="neuron")` with a `LocalLayerRepository` replaces the model's
   RMSNorm forward by the NKI kernel (simulated NeuronCore); outputs and gradients match.
"""
import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import kernels
import torch
from kernels import LocalLayerRepository, Mode, kernelize, use_kernel_forward_from_hub, use_kernel_mapping
from torch import nn

REPO = Path(__file__).resolve().parent / "nki_kernel_repo"


@use_kernel_forward_from_hub("RMSNorm")
class RMSNorm(nn.Module):
    """LlamaRMSNorm: the reference forward the kernel replaces."""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        dtype = hidden_states.dtype
        h = hidden_states.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * h.to(dtype)


class Block(nn.Module):
    def __init__(self, d=256):
        super().__init__()
        self.up = nn.Linear(d, d)
        self.norm = RMSNorm(d)
        self.down = nn.Linear(d, d)

    def forward(self, x):
        return self.down(self.norm(self.up(x)))


def main():
    # 1. variant resolution
    k = kernels.get_local_kernel(REPO)
    print(f"get_local_kernel -> {k.__name__} (backend {k.BACKEND})")
    assert k.BACKEND == "neuron"
    print(f"with backend='cpu' -> {kernels.get_local_kernel(REPO, backend='cpu').BACKEND}")

    # 2. LOCAL_KERNELS override for a Hub repo id
    os.environ["LOCAL_KERNELS"] = f"torch-neuronx/nki-rmsnorm={REPO}"
    k2 = kernels.get_kernel("torch-neuronx/nki-rmsnorm", version=1)
    print(f"LOCAL_KERNELS get_kernel -> {k2.__name__}")

    # 3. kernelize a model on the neuron device
    import copy
    torch.manual_seed(0)
    model = Block().to("neuron")
    model.norm.weight.data.normal_()
    eager = copy.deepcopy(model)
    x = torch.randn(4, 100, 256, device="neuron")
    ref = eager(x)
    mapping = {"RMSNorm": {"neuron": LocalLayerRepository(repo_path=REPO, layer_name="RMSNorm")}}
    with use_kernel_mapping(mapping):
        kernelize(model, device="neuron", mode=Mode.TRAINING)
    out = model(x)
    err = (out - ref).abs().max().item()
    print(f"kernelized RMSNorm: forward from {model.norm.forward.__func__.__module__}; "
          f"max |diff| vs eager = {err:.2e}")
    assert err < 1e-4

    out.pow(2).mean().backward()
    ref.pow(2).mean().backward()
    gerr = max((p.grad - q.grad).abs().max().item()
               for p, q in zip(model.parameters(), eager.parameters()))
    print(f"backward through the NKI op: max |grad diff| vs eager = {gerr:.2e}")
    assert gerr < 1e-4

    import nki
    print(nki.last_run().summary())


if __name__ == "__main__":
    main()
