"""The calibration command's ranges: the shipped calibration/ranges.json is what the shipped table's
residuals give (one source), every compared row belongs to a kind, and --test-rows predicts the
held-out rows with the constants fitted on the others."""
import json
import math
import re
from dataclasses import replace

import pytest

from torch_neuronx.plan import _ranges, calibrate
from torch_neuronx.estimate.assumptions import DEFAULTS
from torch_neuronx.estimate.roofline import parse


def _observed():
    """The compared rows of the shipped table as build() takes them (planned, with roofline terms)."""
    cache, out = calibrate.load_cache(), []
    for row in calibrate.load_rows():
        entry = cache.get(row.layout_key())
        planned = calibrate.planned_figure(row, entry)
        if row.excluded or planned is None or calibrate._phase(row, entry["report"])[3] is None:
            continue
        out.append(calibrate.Observed(row, calibrate.time_ratio(row, planned), None))
    return out


def test_shipped_ranges_are_the_tables_residuals():
    observed = _observed()
    table = calibrate.residuals(observed, calibrate.load_models())
    assert set(table) == {o.row.id for o in observed}
    for o in observed:
        kind, residual = table[o.row.id]
        assert residual == pytest.approx(math.log(o.ratio)) and kind.stack, o.row.id
    shipped = json.loads(calibrate.RANGES.read_text())
    assert shipped == json.loads(json.dumps(_ranges.ranges_table(table)))
    # each kind's range names exactly its own rows
    for key, entry in shipped["kinds"].items():
        assert entry["rows"] == sorted(i for i, (k, _) in table.items() if k.key == key)


def test_test_set_uses_the_constants_fitted_on_the_other_rows():
    """Three TensorEngine-bound rows planned 1.25x slow (efficiency 0.5) and a held-out one planned
    2x slow: the others fit matmul_efficiency 0.625, which predicts the held-out row at 2 / 1.25."""
    row = calibrate.Row("a", "https://x", "r", "Llama-2-7b", "trn1.32xlarge", 1, 32, 1, 1, 1, 4096, 128, 128,
                        "ttft_ms", 10.0, "")
    bound = parse({"terms": {"1.0,0.0,0.0,0.0,0.0": 1}, "fixed_s": 0.0})
    items = [calibrate.Observed(replace(row, id=f"old{i}"), 1.25, bound) for i in range(3)]
    items.append(calibrate.Observed(replace(row, id="new0"), 2.0, bound))
    t = calibrate.test_set(items, re.compile("^new"), replace(DEFAULTS, matmul_efficiency=0.5))
    assert t["training_rows"] == 3 and [r["id"] for r in t["rows"]] == ["new0"]
    assert t["constants"]["matmul_efficiency"] == pytest.approx(0.625, abs=0.002)
    assert t["rows"][0]["default"] == 2.0 and t["rows"][0]["fitted_on_others"] == pytest.approx(1.6, rel=0.005)
    assert t["default"]["within_1.25x"] == 0.0 and t["fitted_on_others"]["within_1.5x"] == 0.0
