"""What an efficiency assumption would change: a stretch of estimated events as roofline terms.

Each op and each compiled kernel takes max(TensorEngine seconds, other engines' seconds, HBM
seconds), its launch apart (_ops.roofline_terms). Its TensorEngine seconds are FLOPs at
matmul_efficiency, the operand fill at hbm_efficiency (a decode step's matrix-vector products
are mostly this) and a fixed DMA latency; its HBM seconds are at hbm_efficiency. So the same
stretch planned with other efficiencies takes

    fixed + sum over terms of count x max(matmul x a + fill x b + latency, other, memory x b)

with a = old matmul_efficiency / new and b = old hbm_efficiency / new, `fixed` being what neither
moves (launches, collectives). This is the cost model itself, where rescaling a category's total
is not (a kernel near the ridge changes bound). The calibration (plan/calibrate.py) fits with it.
"""
from __future__ import annotations


def summarize(events) -> dict:
    """{"terms": {"matmul,fill,latency,other,memory": count}, "fixed_s": seconds} of `events`
    (Report.events entries); identical kernels (a model's repeated layers) share a term."""
    terms: dict[str, int] = {}
    fixed = 0.0
    for e in events:
        parts = e.detail.get("roofline") if e.kind != "collective" else None
        if not parts:
            fixed += e.seconds
            continue
        fixed += e.seconds - sum(_seconds(*p, 1.0, 1.0) for p in parts)   # the launch
        for p in parts:
            key = ",".join(repr(float(x)) for x in p)
            terms[key] = terms.get(key, 0) + 1
    return {"terms": terms, "fixed_s": fixed}


def _seconds(matmul, fill, latency, other, memory, a, b):
    return max(matmul * a + fill * b + latency, other, memory * b)


def parse(summary: dict):
    """(counts, terms as a (n, 5) array, fixed seconds) of a summary, for seconds_at."""
    import numpy as np

    keys = list(summary["terms"])
    terms = np.array([[float(x) for x in k.split(",")] for k in keys], dtype=float).reshape(-1, 5)
    counts = np.array([summary["terms"][k] for k in keys], dtype=float)
    return counts, terms, float(summary["fixed_s"])


def seconds_at(parsed, matmul_scale, memory_scale):
    """The stretch's seconds with its matmul-efficiency-bound and HBM-bound seconds scaled (scalars,
    or numpy arrays of one shape for many settings at once)."""
    import numpy as np

    counts, t, fixed = parsed
    a = np.asarray(matmul_scale, dtype=float)[..., None]
    b = np.asarray(memory_scale, dtype=float)[..., None]
    tensor = t[:, 0] * a + t[:, 1] * b + t[:, 2]
    return fixed + (counts * np.maximum(np.maximum(tensor, t[:, 3]), t[:, 4] * b)).sum(axis=-1)
