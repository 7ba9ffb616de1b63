"""Broadcast copies that feed matmuls, as a compiled Neuron graph runs them.

Grouped-query attention repeats each KV head for its group of query heads before the attention
matmuls (transformers' and NxD Inference's `repeat_kv`: expand, then a contiguous copy). Traced as
ATen ops, the copy is a fused kernel that writes the repeated heads to HBM and the matmul reads
them back. A compiled Neuron graph does not materialise it: the compiler folds a broadcast into
its consumer's loads (a DMA access pattern can step over a dimension with stride 0), and NKI's
attention kernels take the KV heads as they are stored, with a Q/KV head ratio (the NKI library's
Attention TKG and Attention Block TKG kernels, "Grouped-Query Attention (GQA) with configurable
Q/KV head ratios", intermediate tensors kept in SBUF). How often each KV head is then read from HBM
is the assumption `matmul_broadcast_reuse`: 1, once for its whole group (the kernel keeps the tile
in SBUF while the group's query heads use it); 0, once per query head.

A copy is elided only when every kernel that reads it is a matmul-like kernel and the graph does
not return it; anything else (an elementwise consumer, a graph output) keeps it materialised.
"""
from __future__ import annotations

from . import _formulas as formulas

# ops that copy their first argument into a larger contiguous tensor of the same values
_COPIES = {"clone", "contiguous", "expand_copy", "repeat"}


def _packet(func) -> str:
    return func._overloadpacket.__name__ if getattr(func, "_overloadpacket", None) is not None else ""


def elided(per, kernel_of, boundary_kernels: set, outputs: set, key) -> dict:
    """{index in `per` of an elided copy: (source key, source bytes, copy bytes, copy key)}."""
    found = {}
    for i, (func, a, k, o, ph, e) in enumerate(per):
        if _packet(func) not in _COPIES or not a or not hasattr(a[0], "untyped_storage"):
            continue
        outs = formulas.tensors(o)
        if len(outs) != 1 or outs[0].dtype != a[0].dtype:
            continue
        src_bytes, copy_bytes = formulas.touched_bytes(a[0]), formulas.touched_bytes(outs[0])
        if copy_bytes <= src_bytes:
            continue   # a plain copy, not a broadcast
        found[i] = (key(a[0]), src_bytes, copy_bytes, key(outs[0]))
    if not found:
        return {}
    readers: dict = {}
    for i, (func, a, k, o, ph, e) in enumerate(per):
        for t in formulas.tensors((a, k)):
            readers.setdefault(key(t), set()).add(i)
    keep = {}
    for i, (src, src_bytes, copy_bytes, out) in found.items():
        users = readers.get(out, set()) - {i}
        if out in outputs or not users:
            continue
        if all(kernel_of[j] in boundary_kernels for j in users):
            keep[i] = (src, src_bytes, copy_bytes, out)
    return keep


def read_bytes(src_bytes: int, copy_bytes: int, reuse: float) -> float:
    """HBM bytes a matmul reads for a broadcast operand: the source once for the group when
    `reuse` is 1, once per copy when 0."""
    return round(src_bytes + (1.0 - reuse) * (copy_bytes - src_bytes))
