"""How the Neuron runtime runs a collective inside an instance: which algorithm for which size.

The runtime chooses among Ring, Mesh, KangaRing and Recursive Doubling-Halving (RDH) by message
size (docs/hardware-sources.md C5, "Intra-node Collective Communications with AWS Neuron",
its algorithm summary, "sweet range (empirically)"):
- Mesh below 1 MB: O(1) steps (a write to every destination chip, routed through the torus, then
  an intra-chip broadcast / reduction: two steps for an all-gather or a reduce-scatter; an
  all-reduce is the two in sequence);
- RDH from 1 MB to 56 MB: an intra-chip stage and a recursive doubling (halving) over the chips,
  O(log N) steps;
- KangaRing / Ring above 56 MB: O(N) steps.
Per-hop latency of Ring and KangaRing is about 1-2 us, HBM-load dependent (same page). Between
instances (EFA) a hop costs about 15 us (C5, "Inter-node Collective Communications").
Sizes are the whole buffer (an all-gather's output, a reduce-scatter's input, an all-reduce's
tensor), as nccom-test reports them.
"""
from __future__ import annotations

MESH_MAX_BYTES = 1 << 20         # [C5] Mesh: < 1 MB
RDH_MAX_BYTES = 56 << 20         # [C5] RDH: 1-56 MB; KangaRing / Ring above
MESH_STEPS = 2                   # [C5] Mesh all-gather / reduce-scatter: inter-chip write, intra-chip stage
