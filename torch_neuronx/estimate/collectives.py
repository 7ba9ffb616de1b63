"""Collectives: latency + bytes / bandwidth, with the algorithm chosen from where the ranks sit.

Placement of a group (ranks assumed laid out as torchrun does: LOCAL_WORLD_SIZE ranks per
instance, local rank i on logical core i):
- "chip":       all ranks on logical cores of one chip: data moves through the chip's HBM by DMA;
- "neuronlink": one instance, several chips: a ring embedded in the instance's 2D torus (trn1,
                trn2) or through NeuronSwitch (trn3), at the per-chip NeuronLink bandwidth shared
                by the group's ranks on each chip;
- "efa":        several instances: a ring through each instance's NeuronLink and across instances over
                EFA. Only the hops that leave an instance cross EFA, and every rank of an instance
                is in one of the groups running at once (SPMD), so an instance's EFA carries one
                stream per such group: local ranks / the group's ranks on the instance. The ring
                runs at its slower kind of hop. (This is the EFA traffic of the hierarchical split
                too: reduce-scatter inside, all-reduce of 1/k of the data across, all-gather inside.)
Bytes moved per rank follow the ring (NCCL's busbw conventions, as nccom-test reports them,
docs/hardware-sources.md C3): all_reduce 2(n-1)/n of the bytes; all_gather / reduce_scatter and
all_to_all (n-1)/n of the full size; broadcast / reduce the bytes once; send/recv one step.
Steps: inside an instance the Neuron runtime picks the algorithm by size (neuron_hardware.
collectives, docs/hardware-sources.md C5): an all_gather / reduce_scatter below 1 MB runs Mesh
(2 steps), from 1 to 56 MB RDH (an intra-chip step + log2(chips) steps), above that a ring (n-1
steps); an all_reduce is a reduce_scatter and an all_gather (twice the steps). All three move the
ring's bytes (Mesh's link over-subscription is ignored: it runs only where latency dominates).
Across instances (EFA) and for the other kinds: a ring. time = start-up + steps x step latency +
bytes moved / bandwidth, the start-up reduction_launch_s for a collective that reduces
(all_reduce, reduce_scatter, reduce) and collective_launch_s for the others. Ignored: contention
with compute DMA, CC-core scheduling, KangaRing's fewer HBM touches, the hierarchical split of
groups spanning instances in the step count (a ring's 2(n-1) step latencies: nccom-test's 64-rank,
two-instance all-reduce has a 520 us floor where this gives 1.9 ms).
"""
from __future__ import annotations

import functools
import math
import os
from dataclasses import asdict, dataclass

from . import recorders
from .hardware import Hardware
from .hardware import hardware as _hardware

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce",
         "gather", "scatter", "send", "recv", "barrier")


@dataclass(frozen=True)
class CollectiveEstimate:
    name: str
    kind: str
    seconds: float
    bytes: int
    group_size: int
    placement: str
    algorithm: str
    latency_s: float
    transfer_s: float
    bus_bytes_per_s: float     # the bandwidth one rank's traffic gets
    bound: str
    ranks: tuple | None = None  # global ranks of the group, where known

    def as_detail(self) -> dict:
        return asdict(self)


def _ranks_per_instance(hw: Hardware, local_world_size: int | None = None) -> int:
    """Ranks per instance: torchrun's LOCAL_WORLD_SIZE, else every logical core of the instance."""
    return local_world_size or int(os.environ.get("LOCAL_WORLD_SIZE", 0) or 0) or hw.logical_cores


def placement(group_size: int, hw: Hardware, ranks=None, local_world_size: int | None = None) -> str:
    """Where a group's ranks sit: "self", "chip", "neuronlink" or "efa"."""
    if group_size <= 1:
        return "self"
    ranks = list(ranks) if ranks is not None else list(range(group_size))
    per_node = _ranks_per_instance(hw, local_world_size)
    nodes = {r // per_node for r in ranks}
    if len(nodes) > 1:
        return "efa"
    chips = {(r % per_node) // hw.logical_cores_per_chip for r in ranks}
    return "chip" if len(chips) == 1 else "neuronlink"


def _steps_and_traffic(kind: str, n: int, nbytes: int) -> tuple[int, float]:
    if kind == "all_reduce":
        return 2 * (n - 1), 2 * (n - 1) / n * nbytes
    if kind in ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"):
        return n - 1, (n - 1) / n * nbytes
    if kind in ("broadcast", "reduce"):
        return n - 1, float(nbytes)
    if kind in ("send", "recv"):
        return 1, float(nbytes)
    if kind == "barrier":
        return 2 * math.ceil(math.log2(n)), 0.0
    raise ValueError(f"collective kind {kind!r} is not modelled; use one of: {', '.join(KINDS)}")


_STAGED = ("all_reduce", "all_gather", "reduce_scatter")
REDUCING = ("all_reduce", "reduce_scatter", "reduce")   # start with reduction_launch_s


def intra_instance_steps(kind: str, n: int, nbytes: int, chips: int, ring_steps: int) -> tuple[int, str]:
    """(steps, algorithm) the Neuron runtime runs for `kind` over `n` ranks on `chips` chips of one
    instance (neuron_hardware.collectives): Mesh, RDH or the ring by size, never more steps than
    the ring."""
    from neuron_hardware import collectives as cc

    if kind not in _STAGED or n <= 1:
        return ring_steps, "ring"
    phases = 2 if kind == "all_reduce" else 1     # reduce_scatter + all_gather
    if nbytes < cc.MESH_MAX_BYTES:
        steps, name = phases * (cc.MESH_STEPS if chips > 1 else 1), "mesh"
    elif nbytes < cc.RDH_MAX_BYTES:
        local = 1 if n > chips else 0                # the intra-chip stage
        steps, name = phases * (local + math.ceil(math.log2(chips)) if chips > 1 else phases), "recursive doubling-halving"
    else:
        return ring_steps, "ring"
    return (steps, name) if steps < ring_steps else (ring_steps, "ring")


def collective_estimate(kind: str, nbytes: int, group_size: int, *, where: str | None = None,
                        ranks=None, hardware: Hardware | None = None, name: str | None = None
                        ) -> CollectiveEstimate:
    """Estimated time of one collective.

    Args:
        kind: one of KINDS. nbytes: the full buffer (all_gather: the gathered output;
            reduce_scatter: the input before scattering; all_reduce: the tensor).
        group_size: ranks in the group. where: "chip" | "neuronlink" | "efa" (default: from ranks).
    """
    if group_size < 1:
        raise ValueError(f"group_size={group_size} must be >= 1")
    hw = hardware if hardware is not None else _hardware()
    a = hw.assumptions
    where = where or placement(group_size, hw, ranks)
    steps, traffic = _steps_and_traffic(kind, max(group_size, 1), int(nbytes)) if group_size > 1 else (0, 0.0)
    inst = hw.instance
    if where == "self":
        bw, lat, algo = float("inf"), 0.0, "local"
    elif where == "chip":
        # each step reads and writes HBM of the chip (docs/hardware-sources.md C1 HBM/chip); ranks share the chip
        bw = hw.chip.hbm_bytes_per_s * a.hbm_efficiency / (2 * min(group_size, hw.logical_cores_per_chip))
        steps, name = intra_instance_steps(kind, group_size, int(nbytes), 1, steps)
        lat, algo = a.same_chip_step_latency_s, f"{name} through HBM (same chip)"
    elif where == "neuronlink":
        sharing = min(group_size, hw.logical_cores_per_chip)
        bw = inst.neuronlink_bytes_per_s * a.neuronlink_efficiency / sharing
        topo = "NeuronSwitch" if inst.topology == "switch" else "NeuronLink 2D torus"
        steps, name = intra_instance_steps(kind, group_size, int(nbytes), -(-group_size // sharing), steps)
        lat, algo = a.neuronlink_step_latency_s, f"{name} over {topo}"
    elif where == "efa":
        if inst.efa_bytes_per_s <= 0:
            raise ValueError(f"{inst.name} has no EFA figure; choose a multi-instance type such as trn2.48xlarge")
        per_node = _ranks_per_instance(hw)
        members = list(ranks) if ranks is not None else list(range(group_size))
        on_one = max(sum(1 for r in members if r // per_node == node) for node in {r // per_node for r in members})
        streams = max(1, per_node // on_one)     # groups crossing each instance's EFA at once
        efa = inst.efa_bytes_per_s * a.efa_efficiency / streams
        link = inst.neuronlink_bytes_per_s * a.neuronlink_efficiency / min(on_one, hw.logical_cores_per_chip)
        bw = min(efa, link)
        lat, algo = a.efa_step_latency_s, "ring across instances over EFA"
    else:
        raise ValueError(f"where={where!r} is not a placement; use chip, neuronlink or efa")
    start = a.reduction_launch_s if kind in REDUCING else a.collective_launch_s
    latency = start + steps * lat if group_size > 1 else 0.0
    transfer = traffic / bw if traffic else 0.0
    return CollectiveEstimate(name or kind, kind, latency + transfer, int(nbytes), group_size, where,
                              algo, latency, transfer, bw if bw != float("inf") else 0.0,
                              "memory" if transfer >= latency else "launch",
                              tuple(ranks) if ranks is not None else None)


# ---- the hook in ProcessGroupNeuron -----------------------------------------------------------

def _nbytes(ts) -> int:
    return sum(t.numel() * t.element_size() for t in ts)


def _first(ts):
    return ts[0] if ts else None


# method -> (kind, function of its arguments -> (bytes, a tensor to find the device))
_METHODS = {
    "allreduce": ("all_reduce", lambda ts, *a, **k: (_nbytes(ts), _first(ts))),
    "allreduce_coalesced": ("all_reduce", lambda ts, *a, **k: (_nbytes(ts), _first(ts))),
    "reduce": ("reduce", lambda ts, *a, **k: (_nbytes(ts), _first(ts))),
    "reduce_scatter": ("reduce_scatter", lambda outs, ins, *a, **k: (_nbytes(ins[0]) if ins else 0, _first(outs))),
    "reduce_scatter_single": ("reduce_scatter", lambda out, inp, *a, **k: (_nbytes([inp]), out)),
    "reduce_scatter_single_coalesced": ("reduce_scatter", lambda outs, ins, *a, **k: (_nbytes(ins), _first(outs))),
    "broadcast": ("broadcast", lambda ts, *a, **k: (_nbytes(ts), _first(ts))),
    "allgather": ("all_gather", lambda outs, ins, *a, **k: (_nbytes(outs[0]) if outs else 0, _first(ins))),
    "all_gather_single": ("all_gather", lambda out, inp, *a, **k: (_nbytes([out]), out)),
    "allgather_coalesced": ("all_gather", lambda outs, ins, *a, **k: (sum(_nbytes(l) for l in outs), _first(ins))),
    "all_gather_single_coalesced": ("all_gather", lambda outs, ins, *a, **k: (_nbytes(outs), _first(outs))),
    "gather": ("gather", lambda outs, ins, *a, **k: (_nbytes(ins) * 1, _first(ins))),
    "scatter": ("scatter", lambda outs, ins, *a, **k: (_nbytes(outs), _first(outs))),
    "all_to_all_single": ("all_to_all", lambda out, inp, *a, **k: (_nbytes([inp]), inp)),
    "alltoall": ("all_to_all", lambda outs, ins, *a, **k: (_nbytes(ins), _first(ins))),
    "send": ("send", lambda ts, *a, **k: (_nbytes(ts), _first(ts))),
    "recv": ("recv", lambda ts, *a, **k: (_nbytes(ts), _first(ts))),
    "barrier": ("barrier", lambda *a, **k: (0, None)),
}


def _wrap(method, kind, measure):
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        recs = recorders.active()
        if recs:
            _record(recs, self, kind, measure, args, kwargs)
        return method(self, *args, **kwargs)
    return call


def _record(recs, group, kind, measure, args, kwargs) -> None:
    try:
        nbytes, t = measure(*args, **kwargs)
    except (IndexError, TypeError, AttributeError):
        return   # an unusual call shape: the collective itself reports any real error
    if t is not None and t.device.type == "cpu":
        return
    deliver(kind, nbytes, group.size(), ranks=_group_ranks(group), name=f"c10d.{kind}",
            device=(t.device.index or 0) if t is not None else 0, recs=recs)


def deliver(kind: str, nbytes: int, group_size: int, *, ranks=None, name: str | None = None,
            device: int = 0, recs=None) -> None:
    """A collective of `nbytes` over `group_size` ranks, costed once per hardware and delivered to
    `recs` (default: every active recorder, recorders.py). Also for collectives a plan charges
    without running them (ZeRO-1's DP traffic seen from one TP rank)."""
    recs = recorders.active() if recs is None else recs
    for hw, group in recorders.by_hardware(recs):
        c = collective_estimate(kind, nbytes, group_size, hardware=hw, ranks=ranks,
                                name=name or f"c10d.{kind}")
        for r in group:
            r.record_collective(c, device)


def _group_ranks(group):
    """Global ranks of the group this backend object serves (placement depends on them: a TP group
    of ranks 0-1 sits on one chip, an FSDP group of ranks 0, 4, 8... spans chips); None if unknown."""
    cached = getattr(group, "_estimate_group_ranks", False)
    if cached is not False:
        return cached
    ranks = None
    try:
        import torch.distributed as dist

        name = group.getGroupName()
        for pg, pg_name in dist.distributed_c10d._world.pg_names.items():
            if pg_name == name:
                ranks = dist.get_process_group_ranks(pg)
                break
    except Exception:  # noqa: BLE001 - a label for the estimate, never a failure of the collective
        ranks = None
    if ranks is not None:
        group._estimate_group_ranks = ranks
    return ranks


def observe_process_group(cls) -> None:
    """Wrap the collectives of a ProcessGroup class so that inside `estimate()` each one on neuron
    tensors is costed once and delivered to every active recorder; outside, each call reads one list
    and goes on."""
    for name, (kind, measure) in _METHODS.items():
        method = cls.__dict__.get(name)
        if method is not None:
            setattr(cls, name, _wrap(method, kind, measure))
