"""CPU fallbacks of a dry run: every op TorchNeuron would run on the host CPU (CPU_FALLBACK) or
not at all (N), counted per source line, as host syncs are (_syncs.py).

The status comes from the op-support table (torch_neuronx/ops_support, docs/op-support.md); the
time a fallback costs is the estimate's (estimate/_fallbacks.py), in the report's time breakdown
as `cpu_fallback_s`. The site is the innermost frame outside torch and torch_neuronx.
"""
from __future__ import annotations

import threading

from .. import ops_support
from .._user_site import user_site
from ..runtime import units


class FallbackSites:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sites: dict[tuple[str, str, str, tuple], int] = {}

    def record(self, func, args, kwargs) -> None:
        row = ops_support.classify_call(func, args, kwargs)
        if row.status == ops_support.Y:
            return
        key = (user_site(), func._schema.name, row.status, ops_support.dtype_names(args, kwargs))
        with self._lock:
            self.sites[key] = self.sites.get(key, 0) + 1

    def as_list(self) -> list[dict]:
        rows = [{"site": s, "op": op, "status": st, "dtypes": list(dt), "count": n}
                for (s, op, st, dt), n in self.sites.items()]
        return sorted(rows, key=lambda r: (r["status"] != ops_support.N, -r["count"]))


def markdown_lines(report: dict) -> list[str]:
    """The report's section on fallback ops (empty when there are none)."""
    rows = report.get("cpu_fallbacks") or []
    if not rows:
        return []
    rejected = sum(r["count"] for r in rows if r["status"] == ops_support.N)
    lines = ["", f"## CPU fallbacks: {sum(r['count'] for r in rows)} op calls, "
             f"{units.seconds(report['time_by_bound_s'].get('cpu_fallback_s', 0.0))} estimated "
             "(each copies its inputs to the host and its results back; docs/op-support.md)", ""]
    if rejected:
        lines += [f"**{rejected} op calls are not supported by TorchNeuron (N)**: on Trainium the script fails "
                  "there; TORCH_NEURONX_STRICT_OPS=1 raises at the first.", ""]
    lines += ["| site | op | status | dtypes | count |", "|---|---|---|---|---|"]
    lines += [f"| `{r['site']}` | {r['op']} | {r['status']} | {', '.join(r['dtypes'])} | {r['count']} |"
              for r in rows[:20]]
    return lines

