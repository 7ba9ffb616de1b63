"""Op support as TorchNeuron classifies it: Y (runs on the Neuron device), CPU_FALLBACK (runs on
the host CPU, its result copied back), N (not supported), per ATen op and dtype.

TorchNeuron's supported-operators page (table.json "sources") defines these three values; its
per-op detail lives in the torch-neuronx repository's compatibility table, which this package does
not reproduce. table.json holds what TorchNeuron's documentation pages state, each row with its
source and a confidence, and *assumed* defaults for every other op: an op of Core ATen (or one
PyTorch decomposes) runs on the device, any other ATen op falls back to the CPU. Rows marked
"assumed" say what they assume.

Users: `get_fallback_ops()` (tools/op_tracking.py), the estimate's fallback charge
(estimate/_fallbacks.py), the planner's per-call-site list (plan/_fallbacks.py) and the strict mode
`TORCH_NEURONX_STRICT_OPS=1` (strict.py). `python -m torch_neuronx.ops_support --markdown` writes
docs/op-support.md.

Public (``__all__``): the statuses ``Y``, ``CPU_FALLBACK``, ``N``, ``STATUSES``; the table
(``ROWS``, ``Row``, ``DEFAULTS``, ``SOURCES``, ``PAGE_URL``, ``RELEASE``); the queries
``classify``, ``classify_call``, ``status``, ``is_core_aten``, ``dtype_names``; ``markdown()``.
``strict`` (TORCH_NEURONX_STRICT_OPS) and ``doc`` are internal.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import torch

Y, CPU_FALLBACK, N = "Y", "CPU_FALLBACK", "N"
STATUSES = (Y, CPU_FALLBACK, N)
_SEVERITY = {Y: 0, CPU_FALLBACK: 1, N: 2}
_TABLE = Path(__file__).with_name("table.json")


@dataclass(frozen=True)
class Row:
    ops: tuple[str, ...]            # "aten::_grouped_mm", "quantized::*", "aten::_foreach_*", "*"
    dtypes: frozenset | None        # dtype names ("float64"); None: any dtype
    status: str                     # Y | CPU_FALLBACK | N
    source: str                     # a key of SOURCES, or "assumed"
    confidence: str                 # high | med | low | assumed
    note: str
    advice: str = ""                # what to do instead (N and CPU_FALLBACK rows)

    @property
    def source_url(self) -> str:
        return SOURCES.get(self.source, "")

    def matches_op(self, name: str) -> bool:
        return any(_op_matches(pattern, name) for pattern in self.ops)


def _op_matches(pattern: str, name: str) -> bool:
    if pattern == "*":
        return True
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    return name == pattern or name.rstrip("_") == pattern   # aten::foo_ is the in-place aten::foo


def _load() -> tuple[dict, str, list[Row], dict[str, Row]]:
    data = json.loads(_TABLE.read_text())
    rows = []
    for r in data["rows"]:
        ops = (r["op"],) if isinstance(r["op"], str) else tuple(r["op"])
        dtypes = None if r["dtypes"] == "*" else frozenset(r["dtypes"])
        rows.append(Row(ops, dtypes, r["status"], r["source"], r["confidence"], r["note"], r.get("advice", "")))
    defaults = {k: Row(("*",), None, v["status"], v["source"], v["confidence"], v["note"])
                for k, v in data["default"].items()}
    return data["sources"], data["release"], rows, defaults


SOURCES, RELEASE, ROWS, DEFAULTS = _load()
PAGE_URL = SOURCES["supported-operators"]
for _row in ROWS + list(DEFAULTS.values()):   # a malformed table fails at import, not at an op
    if _row.status not in STATUSES or not (_row.source in SOURCES or _row.source == "assumed"):
        raise ValueError(f"{_TABLE}: row {_row.ops} has status {_row.status!r} (use one of {STATUSES}) "
                         f"or source {_row.source!r} (use a key of 'sources' or 'assumed')")


def base_name(name: str) -> str:
    """'aten::add_' for 'aten::add_.Tensor' (also accepts 'aten.add_.Tensor', an OpOverload's str)."""
    if "::" not in name and name.count(".") >= 1:
        namespace, _, rest = name.partition(".")
        name = f"{namespace}::{rest}"
    qualified, _, _overload = name.partition(".")
    return qualified


@functools.lru_cache(maxsize=None)
def _core_decomposed() -> frozenset[str]:
    """Base names ("aten::addcmul_") of the ops PyTorch's decompositions rewrite into other ATen ops:
    the Core ATen decomposition set and the global table (torch._decomp, filled when it is imported)."""
    from torch._decomp import core_aten_decompositions, decomposition_table

    ops = list(core_aten_decompositions()) + list(decomposition_table)
    return frozenset(base_name(op.name()) for op in ops if hasattr(op, "name"))


@functools.lru_cache(maxsize=None)
def is_core_aten(name: str) -> bool:
    """Whether `name` reaches the device as Core ATen: an op of PyTorch's Core ATen opset, an in-place
    or out= variant of one, or an op PyTorch's decompositions rewrite into other ATen ops."""
    qualified = base_name(name)
    namespace, _, base = qualified.partition("::")
    if namespace != "aten":
        return False
    for packet_name in dict.fromkeys((base, base.rstrip("_"))):
        packet = getattr(torch.ops.aten, packet_name, None)
        if packet is None:
            continue
        for overload in packet.overloads():
            op = getattr(packet, overload, None)
            if op is not None and torch.Tag.core in op.tags:
                return True
    decomposed = _core_decomposed()
    return qualified in decomposed or qualified.rstrip("_") in decomposed


def _op_row(name: str) -> Row:
    exact = [r for r in ROWS if r.dtypes is None and any(p == name or p == name.rstrip("_") for p in r.ops)]
    if exact:
        return exact[0]
    wildcard = [r for r in ROWS if r.dtypes is None and r.matches_op(name)]
    if wildcard:
        return wildcard[0]
    if not name.startswith("aten::"):
        return DEFAULTS["other_namespace"]
    return DEFAULTS["core"] if is_core_aten(name) else DEFAULTS["other"]


@functools.lru_cache(maxsize=4096)
def classify(name: str, dtypes: tuple[str, ...] | frozenset = ()) -> Row:
    """The row that decides op `name` ("aten::add_.Tensor") on tensors of `dtypes` ("float32", ...).

    The op's own row (or the assumed default) decides, unless a dtype row is more severe
    (an N dtype such as a quantized one makes any op N)."""
    name = base_name(name)
    row = _op_row(name)
    for r in ROWS:
        if r.dtypes is not None and r.dtypes & set(dtypes) and r.matches_op(name) \
                and _SEVERITY[r.status] > _SEVERITY[row.status]:
            row = r
    return row


def status(name: str, dtypes=()) -> str:
    return classify(name, tuple(sorted(set(dtypes)))).status


@functools.lru_cache(maxsize=None)
def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")   # str(dtype) is slow: once per dtype


def dtype_names(*values) -> tuple[str, ...]:
    """Sorted dtype names of the tensors (and torch.dtype values) in `values`, nested lists included."""
    found: set = set()

    def visit(v) -> None:
        if isinstance(v, torch.Tensor):
            found.add(v.dtype)
        elif isinstance(v, torch.dtype):
            found.add(v)
        elif isinstance(v, (list, tuple)):
            for x in v:
                visit(x)
        elif isinstance(v, dict):
            for x in v.values():
                visit(x)

    for v in values:
        visit(v)
    return tuple(sorted(_dtype_name(d) for d in found))


def classify_call(func, args, kwargs, out=None) -> Row:
    """The row for one call of OpOverload `func` (its name and the dtypes of its tensors)."""
    return classify(func._schema.name, dtype_names(args, kwargs, out))


def markdown() -> str:
    from .doc import render

    return render(ROWS, DEFAULTS, SOURCES, PAGE_URL, RELEASE)


__all__ = ["CPU_FALLBACK", "DEFAULTS", "N", "PAGE_URL", "RELEASE", "ROWS", "Row", "SOURCES", "STATUSES", "Y",
           "classify", "classify_call", "dtype_names", "is_core_aten", "markdown", "status"]
