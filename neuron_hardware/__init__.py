"""The one description of Trainium hardware: chips, NeuronCores, engines, memories, links.

Pure Python with no dependencies, so that every user reads the same table:
- the virtual runtime (`torch_neuronx/runtime/catalogue.py`: cores per chip, HBM, LNC);
- the NKI simulator (`nki/targets.py`: SBUF/PSUM capacities, engine clocks, DMA queues);
- the cost model (`torch_neuronx/estimate/hardware.py`: peaks, bandwidths, links; host_link.py: PCIe).

Every figure names its entry in `docs/hardware-sources.md` (section C unless stated) next to it. Figures are per chip or per *physical* NeuronCore;
per-logical-core views (LNC=2 pairs two physical cores) are derived by the users above.
Nothing here is an assumption: assumptions of the cost model live in
`torch_neuronx/estimate/assumptions.py`, named and overridable.
"""
from __future__ import annotations

from . import collectives
from .chips import CHIPS, ChipSpec, chip
from .host_link import pcie_bytes_per_s
from .instances import DEFAULT_INSTANCE_TYPE, INSTANCES, InstanceSpec, instance

__all__ = ["CHIPS", "collectives", "ChipSpec", "DEFAULT_INSTANCE_TYPE", "INSTANCES", "InstanceSpec", "chip", "instance", "pcie_bytes_per_s"]
