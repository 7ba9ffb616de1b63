"""The same computation with and without an op TorchNeuron runs on the host CPU, estimated on trn2.

    python examples/cpu_fallback_estimate.py

`torch.median` has no Core ATen lowering and no PyTorch decomposition (docs/op-support.md:
CPU_FALLBACK), so each call copies its input to the host, runs there and copies the medians back;
sorting (Core ATen) and taking the middle element computes the same on the device. Prints both
estimates and the fallback's charge from its closed form (docs/estimate.md, "CPU fallbacks").
"""
import torch

import torch_neuronx

B, D, STEPS = 64, 4096, 8
MID = (D - 1) // 2


def centre(x, median):
    for _ in range(STEPS):
        x = x - median(x)
    return x


def main() -> None:
    x = torch.randn(B, D, device="neuron")
    torch_neuronx.clear_op_tracking()
    with torch_neuronx.estimate("trn2.3xlarge") as fb:
        y1 = centre(x, lambda t: torch.median(t, dim=-1, keepdim=True).values)
    with torch_neuronx.estimate("trn2.3xlarge") as dev:
        y2 = centre(x, lambda t: t.sort(dim=-1).values[:, MID:MID + 1])
    assert torch.equal(y1.cpu(), y2.cpu())
    a = fb.hardware.assumptions
    nbytes = B * D * 4 + B * (4 + 8)   # the input to the host; medians and their indices back
    charge = (a.host_sync_s + nbytes / a.host_link_bytes_per_s + a.cpu_fallback_op_s
              + nbytes / a.host_memory_bytes_per_s)
    print(f"with CPU fallbacks : {fb.total_s * 1e3:.3f} ms "
          f"({STEPS} x median charged {charge * 1e6:.1f} us each)")
    print(f"on the device only : {dev.total_s * 1e3:.3f} ms")
    print(f"ratio              : {fb.total_s / dev.total_s:.1f}x")
    print(f"fallback ops       : {torch_neuronx.get_fallback_ops()}")


if __name__ == "__main__":
    main()
