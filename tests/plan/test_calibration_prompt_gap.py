"""benchmarks/calibration_prompt_gap.py: the gap per attention score element is read from the
calibration cache against a score count computed here by hand from the public config."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "calibration_prompt_gap.py"


def _table(stdout: str) -> dict[str, list[str]]:
    rows = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| trn1-"):
            rows[cells[0]] = cells
    return rows


def test_score_elements_and_gap_are_the_closed_form():
    out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    rows = _table(out.stdout)
    # Llama-2-13B: 40 layers, 40 heads padded to 64 at TP 32 (2 per core), one 4,096-token prompt
    cells = rows["trn1-llama-2-13b-b1-in4096-out4096-ttft"]
    elements = 40 * (64 / 32) * 1 * 4096 ** 2
    assert float(cells[6]) == float(f"{elements:.3g}")
    published, planned = float(cells[3]), float(cells[4])
    assert published == 864.1
    assert abs(float(cells[7]) - (published - planned) * 1e6 / elements) < 1e-3
    # batch multiplies the count: 8 prompts of Llama-2-13B
    assert float(rows["trn1-llama-2-13b-b8-in4096-out4096-ttft"][6]) == float(f"{8 * elements:.3g}")
    # only Transformers NeuronX TTFT rows, none of the excluded int8-weight ones
    assert all(r.endswith("-ttft") and "llama-3-8b" not in r for r in rows)
    assert "median" in out.stdout.splitlines()[-1]


def test_missing_cache_says_so(tmp_path):
    out = subprocess.run([sys.executable, str(SCRIPT), "--cache", str(tmp_path / "none.json")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 1
    assert "no planned Transformers NeuronX TTFT rows" in out.stderr and "--plan-missing" in out.stderr
