"""The one model of a plan's JSON report, for its three kinds.

- `rank`: one process's dry run (`python -m torch_neuronx.plan run` of one process, plan/_report.py);
- `merged`: the per-rank reports of a multi-rank `plan run` merged (plan/distributed/_merge.py), with
  each started rank's own `rank` report under `ranks`;
- `model`: a model-level command (`plan train`, `plan generate`, plan/models/_report.py).

Every kind carries `schema_version`, `kind` and the same fit figures under the same names, with the
unit in the name (`_bytes`, `_s`): `dry_run`, `instance`, `lnc`, `fits`, `oom`,
`peak_hbm_bytes_per_core` (a list with one entry per rank in a `merged` report),
`hbm_capacity_bytes_per_core`, `headroom_bytes_per_core`. The rest of a report is its kind's own
(`details`, written flat next to the common keys). `PlanReport.from_json` also reads reports written
before the names were unified (schema 1 and unversioned ones), so old `--json` files still open in
`python -m torch_neuronx.plan html OLD.json`.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

SCHEMA_VERSION = 2
KINDS = ("rank", "merged", "model")

# Earlier key names and the names they have now (read, never written).
RENAMED = {
    "phantom_memory": "dry_run",                    # rank and merged reports said phantom_memory
    "headroom_bytes": "headroom_bytes_per_core",    # rank and merged reports: the fullest core's headroom
    "time_breakdown": "time_by_bound_s",            # rank reports: seconds by what bounds them
}


@dataclass
class PlanReport:
    """A plan's report: the figures every kind has, typed, and the kind's own keys in `details`."""
    kind: str
    dry_run: bool                                   # phantom device memory: nothing allocated on the host
    instance: str
    lnc: int
    fits: bool
    peak_hbm_bytes_per_core: int | list[int]        # `merged`: one per rank
    hbm_capacity_bytes_per_core: int | None
    headroom_bytes_per_core: int | None             # capacity minus the peak of the fullest core
    oom: Any = None                                 # what ran out of memory, None when it fit
    details: dict = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"PlanReport kind={self.kind!r}: use one of {', '.join(KINDS)}.")

    def to_json(self) -> dict:
        """The report as written to `--json`: the common keys first, then the kind's own."""
        common = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("details", "schema_version")}
        out = {"schema_version": self.schema_version, **common}
        clash = sorted(set(out) & set(self.details))
        if clash:
            raise ValueError(f"PlanReport details repeat the common keys {clash}: set them as fields.")
        out.update(self.details)
        return out

    @classmethod
    def from_json(cls, data: dict) -> PlanReport:
        """Read a report of any kind and schema version (earlier key names included)."""
        if not isinstance(data, dict):
            raise TypeError(f"a plan report is a JSON object, not {type(data).__name__}")
        version = data.get("schema_version", 1)
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise ValueError(f"schema_version={version!r}: this torch-neuronx reads plan reports up to version "
                             f"{SCHEMA_VERSION}; upgrade torch-neuronx to read it.")
        data = {RENAMED.get(k, k): v for k, v in data.items()}
        kind = data.pop("kind", None) or _kind_of(data)
        if kind == "merged" and isinstance(data.get("ranks"), dict):
            data["ranks"] = {r: cls.from_json(rank).to_json() for r, rank in data["ranks"].items()}
        names = [f.name for f in fields(cls) if f.name not in ("kind", "details", "schema_version")]
        required = [n for n in names if n != "oom"]
        missing = [n for n in required if n not in data]
        if missing:
            raise ValueError(f"not a plan report of kind {kind!r}: it lacks {', '.join(missing)}; give the --json "
                             f"of plan run, train or generate.")
        common = {n: data.pop(n) for n in names if n in data}
        data.pop("schema_version", None)
        return cls(kind=kind, details=data, **common)


def normalized(data: dict) -> dict:
    """A report dict of any version with today's key names (what readers of `--json` work on)."""
    return PlanReport.from_json(data).to_json()


def stamped(kind: str, data: dict) -> dict:
    """`data` as a report of `kind` at this schema version, checked: what the writers return."""
    return PlanReport.from_json({**data, "kind": kind, "schema_version": SCHEMA_VERSION}).to_json()


def _kind_of(data: dict) -> str:
    """The kind of a report written before reports named it."""
    if "ranks" in data and "ranks_run" in data:
        return "merged"
    if "cores" in data:
        return "rank"
    if "layout" in data:
        return "model"
    raise ValueError("not a plan report: it has neither `cores` (plan run), `ranks` (a merged multi-rank plan "
                     "run) nor `layout` (plan train / generate); give the --json of one of those commands.")
