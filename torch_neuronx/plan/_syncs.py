"""Host syncs of a dry run: every read of device values, counted per source line.

Each is a point where the host waits for the device on Trainium too (.item(), bool(tensor),
.tolist(), .cpu(), print). The site is the innermost frame outside torch and torch_neuronx
(a user's script, or the library such as transformers that reads the value).
"""
from __future__ import annotations

import threading

from .._user_site import user_site  # the user's line of a host sync or an error
from . import _dry_run_env as config
from ._errors import DryRunError

_KINDS = {"aten::_local_scalar_dense": "item", "aten::_to_copy": "to_host", "aten::copy_": "to_host"}


class HostSyncs:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sites: dict[tuple[str, str], int] = {}
        self.limit = config.max_syncs_per_site()

    def record(self, func, session=None) -> None:
        site = user_site()
        kind = _KINDS.get(func._schema.name, func._schema.name.split("::")[-1])
        with self._lock:
            n = self.sites.get((site, kind), 0) + 1
            self.sites[(site, kind)] = n
        if n > self.limit:
            raise DryRunError(
                f"{site} has read device values {n} times ({kind}); a loop that waits for a value "
                "(a loss threshold, a convergence test) does not end on a dry run's placeholder values "
                "(zeros). Bound the loop by a step count when torch_neuronx.plan.is_active(), or raise "
                f"{config.MAX_SYNCS_PER_SITE}.")

    @property
    def total(self) -> int:
        return sum(self.sites.values())

    def as_list(self) -> list[dict]:
        rows = [{"site": s, "kind": k, "count": n} for (s, k), n in self.sites.items()]
        return sorted(rows, key=lambda r: -r["count"])
