"""What a vLLM Neuron deployment compiles, and what neuronx-cc would take for it.

vLLM Neuron compiles one prefill graph per token bucket and one decode graph per batch bucket at
start-up, whatever the requests turn out to be, so every bucket is in the budget, not only those the
planned workload reached. Each graph's compile time is the public compile-time fit's estimate for its
FLOPs per core (plan/_compile_time.py, docs/compile-budget.md), with the fit's range or "unknown"
outside the sizes its public rows span. A bucket the workload never reached was never priced: its
FLOPs are those of the nearest priced bucket of its kind scaled by the bucket's size (a graph's matmul
work is linear in its tokens or sequences; a prefill's attention within its bucket grows faster, so a
larger unpriced prefill bucket is under-counted), named as the assumption `unpriced_buckets`.
"""
from __future__ import annotations

from .. import _compile_time as compile_time

ASSUMPTION = ("a bucket the workload never reached takes the FLOPs of the nearest priced bucket of its kind "
              "scaled by the bucket's size; the total is the graphs' compile times one after the other")


def _flops(kind: str, bucket: int, priced: dict) -> tuple[float | None, str]:
    """FLOPs per core of a graph, and how they were found."""
    if (kind, bucket) in priced and priced[(kind, bucket)].get("flops"):
        return priced[(kind, bucket)]["flops"], "priced"
    known = [(b, f["flops"]) for (k, b), f in priced.items() if k == kind and f.get("flops")]
    if not known:
        return None, "no bucket of this kind priced"
    near, flops = min(known, key=lambda item: abs(item[0] - bucket))
    return flops * bucket / near, f"scaled from the {near} bucket"


def budget(buckets: dict[str, list[int]], priced: dict) -> dict:
    """Every graph the deployment compiles with its FLOPs per core and estimated compile seconds, and the totals."""
    graphs = []
    for kind, sizes in (("cte", buckets["cte"]), ("tkg", buckets["tkg"])):
        for bucket in sizes:
            flops, how = _flops(kind, bucket, priced)
            graphs.append({"kind": kind, "bucket": bucket, "flops_per_core": flops, "flops_from": how,
                           **compile_time.estimate(flops)})
    known = [g for g in graphs if "estimate_s" in g]
    return {"graphs": graphs, "count": len(graphs), "unknown": len(graphs) - len(known),
            "total_s": sum(g["estimate_s"] for g in known) if known else None,
            "total_low_s": sum(g["low_s"] for g in known) if known else None,
            "total_high_s": sum(g["high_s"] for g in known) if known else None,
            "fit": compile_time.status(), "assumption": ASSUMPTION}
