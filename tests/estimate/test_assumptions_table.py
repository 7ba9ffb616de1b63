"""docs/estimate.md's assumptions table names every assumption of the cost model, once, with its default."""
from __future__ import annotations

from pathlib import Path

import pytest

from torch_neuronx.estimate import assumptions

DOC = Path(__file__).resolve().parents[2] / "docs" / "estimate.md"
UNITS = {"us": 1e-6, "GB/s": 1e9}


def _table() -> dict[str, str]:
    """name -> documented default, from the table whose header is `| name | default | basis |`."""
    text = DOC.read_text()
    start = text.index("| name | default | basis |")
    rows = {}
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        names, default = [c.strip() for c in line.strip("|").split("|")[:2]]
        values = [v.strip() for v in default.split(",")]
        names = [n.strip() for n in names.split(",")]
        for i, name in enumerate(names):
            rows[name] = values[i] if len(values) == len(names) else values[0]
    return rows


def _number(text: str) -> float:
    value, _, unit = text.partition(" ")
    return float(value) * UNITS.get(unit, 1.0)


def test_the_table_names_every_assumption_with_its_default():
    table = _table()
    assert sorted(table) == sorted(assumptions.NAMES)
    for name, default in table.items():
        assert _number(default) == pytest.approx(getattr(assumptions.DEFAULTS, name), rel=0.01), name


def test_the_parser_reads_units():
    assert _number("437 us") == 437e-6 and _number("63.0 GB/s") == 63e9 and _number("0.86") == 0.86
