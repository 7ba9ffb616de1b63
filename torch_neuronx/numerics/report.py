"""Findings: where Trainium would compute a different result, once per
(difference, op, Python source line), with a count and the worst value seen.

`numerics_report()` formats them (torch.cuda.memory_summary is the model);
`findings()` returns them as plain dicts for scripts and tests.
"""
from __future__ import annotations

import threading

from .._user_site import user_site  # numerics reports name the user's line

_lock = threading.Lock()
_sites: dict[tuple, dict] = {}
_exposure: dict[tuple, int] = {}  # (kind, op) -> ops that used the dtype path, lossy or not


# What the user can do about each difference (docs/hardware-sources.md A).
ADVICE = {
    "int64": "keep indices and counters in int32, or compile with --native-int64=enabled on trn2 "
             "(TORCH_NEURONX_NUMERICS_INT64=native to emulate that)",
    "int_via_fp32": "keep integer operands below 2^24 or do this op in float32/bfloat16 yourself "
                    "(Trainium has no integer datapath for matmul, scatter_add/index_add, all-reduce, reduce-scatter)",
    "float64": "use float32 (Trainium has no float64 datapath)",
    "fp8": "scale fp8_e4m3 values into +-240 (Neuron E4M3), e.g. rescale checkpoints by 448/240",
}
MESSAGES = {
    "int64": "on Trainium (neuronx-cc default int64 -> int32) this value is lossy",
    "int_via_fp32": "on Trainium this integer op is computed in float32, lossy above 2^24",
    "float64": "on Trainium float64 is computed as float32, this value is rounded",
    "fp8": "on Trainium (Neuron E4M3 range +-240) this float8_e4m3fn value is out of range",
}


def record(kind: str, op: str, value: float, detail: str = "") -> None:
    site = user_site()
    key = (kind, op, site)
    with _lock:
        entry = _sites.get(key)
        if entry is None:
            _sites[key] = {"kind": kind, "op": op, "site": site, "count": 1, "worst": value,
                           "detail": detail, "message": MESSAGES.get(kind, kind),
                           "advice": ADVICE.get(kind, "")}
        else:
            entry["count"] += 1
            if abs(value) > abs(entry["worst"]):
                entry["worst"] = value
                entry["detail"] = detail or entry["detail"]


def expose(kind: str, op: str) -> None:
    """Count an op that takes a path Trainium computes differently (even if exact here)."""
    key = (kind, op)
    _exposure[key] = _exposure.get(key, 0) + 1


def exposure() -> dict[str, dict[str, int]]:
    """{kind: {op: count}} of every op that used an int64/float64/fp8/integer-via-fp32 path."""
    out: dict[str, dict[str, int]] = {}
    for (kind, op), n in sorted(_exposure.items()):
        out.setdefault(kind, {})[op] = n
    return out


def findings() -> list[dict]:
    """Every recorded site, most frequent first."""
    with _lock:
        return sorted((dict(e) for e in _sites.values()), key=lambda e: (-e["count"], e["site"], e["op"]))


def reset() -> None:
    with _lock:
        _sites.clear()
        _exposure.clear()


def _fmt(value) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return str(int(value))
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def format_report(mode: str) -> str:
    rows = findings()
    head = f"torch-neuronx numerics report (TORCH_NEURONX_NUMERICS={mode})"
    if mode == "host":
        return head + ": nothing observed (host mode; set TORCH_NEURONX_NUMERICS=check)."
    if mode == "trainium" and not rows:
        return head + ": results are computed as Trainium computes them (set TORCH_NEURONX_NUMERICS=check to list where they differ)."
    used = exposure()
    uses = "; ".join(f"{kind}: {sum(ops.values())} op(s)" for kind, ops in used.items())
    uses = f" Ops on these paths (exact here): {uses}." if uses else ""
    if not rows:
        return head + ": no op would compute a different result on Trainium." + uses
    lines = [head + f": {len(rows)} site(s) where Trainium would differ." + uses]
    for e in rows:
        lines.append(f"  {e['site']}: {e['op']} x{e['count']}, worst {_fmt(e['worst'])}"
                     + (f" ({e['detail']})" if e["detail"] else ""))
        lines.append(f"      {e['message']}; to avoid: {e['advice']}")
    return "\n".join(lines)
