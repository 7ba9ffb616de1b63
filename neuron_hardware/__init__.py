"""The one description of Trainium hardware: chips, NeuronCores, engines, memories, links.

Pure Python with no dependencies, so that every user reads the same table:
- the virtual runtime (`torch_neuronx/runtime/topology.py`: cores, HBM per core, LNC) and the tools;
- the NKI simulator (`nki/targets.py`: SBUF/PSUM capacities, engine clocks, DMA queues);
- the cost model (`torch_neuronx/estimate/hardware.py`: peaks, bandwidths, links; host_link.py: PCIe).

Every figure names its entry in `docs/hardware-sources.md` (section C unless stated) next to it. Figures are per chip or per *physical* NeuronCore;
the per-logical-core view (LNC=2 pairs two physical cores) is `logical_core_view(instance, lnc)`, the one
derivation every user above reads.
Nothing here is an assumption: assumptions of the cost model live in
`torch_neuronx/estimate/assumptions.py`, named and overridable.

Public (``__all__``): ``CHIPS``, ``ChipSpec``, ``chip(name)``; ``INSTANCES``, ``InstanceSpec``,
``instance(name)``, ``DEFAULT_INSTANCE_TYPE``; ``pcie_bytes_per_s``; ``logical_core_view(instance,
lnc)``, the ``LogicalCoreView`` it returns and ``HardwareChoiceError`` for a bad choice; ``OnLogicalCore``
and ``view_attribute`` for classes that carry a view. The modules chips, instances, host_link and
logical_core hold the tables and the derivation; ``collectives`` the runtime's choice of collective
algorithm by message size.
"""
from __future__ import annotations

from . import collectives
from .chips import CHIPS, ChipSpec, chip
from .host_link import pcie_bytes_per_s
from .instances import DEFAULT_INSTANCE_TYPE, INSTANCES, InstanceSpec, instance
from .logical_core import HardwareChoiceError, LogicalCoreView, OnLogicalCore, logical_core_view, view_attribute

__all__ = ["CHIPS", "ChipSpec", "DEFAULT_INSTANCE_TYPE", "HardwareChoiceError", "INSTANCES", "InstanceSpec",
           "LogicalCoreView", "OnLogicalCore", "chip", "collectives", "instance", "logical_core_view",
           "pcie_bytes_per_s", "view_attribute"]
