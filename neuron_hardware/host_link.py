"""The link between the host CPU and a Trainium chip: PCIe.

Neuron's documentation names PCIe as the host link ("NeuronCores ... use high-bandwidth device
memory and PCIe interfaces to coordinate with the host CPU", neuron-runtime/guides/
nrt-developer-guide.rst; Neuron Explorer shows host_to_device / device_to_host "PCIe traffic",
tools/neuron-explorer/overview-system-profiles.rst) but publishes neither the generation nor the
width of a chip's host link. What is public is PCIe itself: the per-lane transfer rate and line
encoding of each generation (PCI-SIG specifications, https://pcisig.com/specifications:
PCIe 4.0 16 GT/s, 5.0 32 GT/s, both 128b/130b; 6.0 64 GT/s PAM4 with 256-byte FLITs carrying
242 bytes of payload and protection, taken here as the usable fraction). Which generation and
width a chip's host link has is a cost-model assumption (torch_neuronx/estimate/assumptions.py,
`host_link_bytes_per_s`), built from these figures.
"""
from __future__ import annotations

PCIE_GT_PER_S = {4: 16.0, 5: 32.0, 6: 64.0}            # per lane, per direction (PCI-SIG)
PCIE_ENCODING = {4: 128 / 130, 5: 128 / 130, 6: 242 / 256}


def pcie_bytes_per_s(generation: int, lanes: int) -> float:
    """One direction of a PCIe link: lanes x transfer rate x encoding efficiency / 8 bits."""
    if generation not in PCIE_GT_PER_S:
        raise ValueError(f"PCIe generation {generation!r} has no figure here; use one of {sorted(PCIE_GT_PER_S)}")
    if lanes not in (1, 2, 4, 8, 16):
        raise ValueError(f"PCIe link width {lanes!r} is not a PCIe width; use 1, 2, 4, 8 or 16 lanes")
    return lanes * PCIE_GT_PER_S[generation] * 1e9 * PCIE_ENCODING[generation] / 8
