"""The HTML report as a user sees it: written by `--html` (and `plan html REPORT.json`), opened in
headless Chromium; what is drawn is read back from the DOM Chromium built and kept as a screenshot
in the test's tmp dir."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser

import pytest

from torch_neuronx.plan.__main__ import main as plan_main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (CI installs it)")


def _chromium(args: list[str], page: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--virtual-time-budget=2000", *args, f"file://{page}"],
                          capture_output=True, text=True, timeout=120)


def _dom(page) -> "Dom":
    p = _chromium(["--dump-dom"], str(page))
    assert p.returncode == 0 and "<html" in p.stdout, p.stderr[-2000:]
    dom = Dom()
    dom.feed(p.stdout)
    return dom


def _screenshot(page, png) -> None:
    p = _chromium(["--window-size=1240,1800", f"--screenshot={png}"], str(page))
    assert p.returncode == 0 and os.path.getsize(png) > 20_000, p.stderr[-2000:]   # a page, not a blank


class Dom(HTMLParser):
    """The elements Chromium built: tag, attributes and text of each, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[dict] = []
        self._open: list[dict] = []

    def handle_starttag(self, tag, attrs):
        e = {"tag": tag, "attrs": dict(attrs), "text": ""}
        self.elements.append(e)
        if tag not in ("br", "meta", "img", "input", "hr", "link"):   # HTML's void elements
            self._open.append(e)

    def handle_endtag(self, tag):
        while self._open:
            if self._open.pop()["tag"] == tag:
                break

    def handle_data(self, data):
        for e in self._open:
            e["text"] += data

    def by_id(self, id_: str) -> dict:
        found = [e for e in self.elements if e["attrs"].get("id") == id_]
        assert found, f"no element #{id_}"
        return found[0]

    def within(self, id_: str, tag: str, cls: str | None = None) -> list[dict]:
        """Elements of `tag` (and class) after #id_ up to the next section."""
        start = self.elements.index(self.by_id(id_))
        out = []
        for e in self.elements[start + 1:]:
            if e["tag"] == "section":
                break
            if e["tag"] == tag and (cls is None or cls in e["attrs"].get("class", "").split()):
                out.append(e)
        return out


def _self_contained(html: str) -> None:
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)
    assert "url(" not in html and "@import" not in html


def _plan(command, tiny_config_dir, tmp_path, *extra):
    out, page = tmp_path / f"{command}.json", tmp_path / f"{command}.html"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_NEURONX_DRY_RUN", "TORCH_NEURONX_INSTANCE_TYPE",
                                                                      "NEURON_LOGICAL", "TORCH_NEURONX_PLAN_"))}
    p = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", command, "--config", tiny_config_dir,
                        "--instance", "trn2.3xlarge", "--lnc", "2", "--quiet", "--json", str(out), "--html", str(page),
                        *extra], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    return json.loads(out.read_text()), page


@needs_chromium
def test_train_page_draws_memory_time_timeline_collectives_and_notes(tiny_config_dir, tmp_path):
    report, page = _plan("train", tiny_config_dir, tmp_path, "--tp", "2", "--fsdp", "2", "--seq-len", "16")
    html = page.read_text()
    _self_contained(html)
    _screenshot(page, tmp_path / "train.png")
    dom = _dom(page)
    assert dom.by_id("verdict")["text"] == "fits"
    assert "assumed mode: eager" in dom.by_id("assumptions")["text"]
    # per-core HBM at the peak: one stacked bar against capacity, parts labelled with their bytes
    hbm = dom.by_id("hbm")
    mem = dom.within("memory", "rect", "mem")
    assert hbm["tag"] == "svg" and {"parameters", "optimizer_state"} <= {e["attrs"]["class"].split()[1] for e in mem}
    assert sum(float(e["attrs"]["width"]) for e in mem) > 0
    assert dom.within("memory", "rect", "capacity")
    assert "of 24.00 GiB" in hbm["text"]
    # time breakdown: one bar per kind of work the report has
    kinds = [e["text"] for e in dom.within("time-breakdown", "text") if "(" not in e["text"]]
    assert kinds[:3] == list(report["time_breakdown_s"])[:3]
    # the estimated timeline: a track per kind with its spans
    tracks = dom.within("timeline-section", "g", "track")
    assert len(tracks) == len(report["timeline"]["rows"]) and len(tracks) >= 3
    assert sum(len(r["spans"]) for r in report["timeline"]["rows"]) == len(dom.within("timeline-section", "rect")) \
        - len(tracks)   # one background rect per track
    # collectives per group: TP2 x FSDP2 of 4 ranks, groups with their global ranks
    cells = [e["text"] for e in dom.within("collectives", "td")]
    assert "all_gather" in cells and ("0, 2" in cells or "0, 1" in cells)
    # notes: the unmodelled ops with their counts
    notes = " ".join(e["text"] for e in dom.within("notes", "li"))
    unmodelled = [n for n in report["notes"] if n["kind"] == "unmodelled op"]
    assert unmodelled, report["notes"]
    for n in unmodelled:
        count = "once" if n["count"] == 1 else f"{n['count']:,} times"
        assert f"{n['text']} ({count})" in notes, (n, notes)


@needs_chromium
def test_sweep_page_sorts_by_a_clicked_column(tiny_config_dir, plan_env, tmp_path):
    rows_json, page = tmp_path / "rows.json", tmp_path / "sweep.html"
    assert plan_main(["sweep", "--config", tiny_config_dir, "--instances", "trn2.3xlarge", "--lnc", "2", "--tp", "1,2,3",
                       "--fsdp", "1", "--seq-len", "16", "--real", "--in-process", "--quiet", "--json", str(rows_json),
                       "--html", str(page)]) == 0
    rows = json.loads(rows_json.read_text())
    _self_contained(page.read_text())
    _screenshot(page, tmp_path / "sweep.png")
    dom = _dom(page)
    assert dom.by_id("sweep")["tag"] == "table"
    body = [e for e in dom.elements if e["tag"] == "tr" and e["attrs"].get("class") in ("ok", "no")]
    assert len(body) == 3 and "does not divide" in body[2]["text"]   # TP 3 on 4 cores: why, in its row
    # a user clicks "tokens/s" twice (descending): the page's own script sorts the rows
    clicked = tmp_path / "clicked.html"
    clicked.write_text(page.read_text().replace("</body>", "<script>var h=document.querySelectorAll('#sweep th')[12];"
                                                           "h.click();h.click();</script></body>"))
    order = [e["attrs"].get("data-v") for e in _dom(clicked).elements
             if e["tag"] == "td" and e is not None][12::15]
    rates = [float(v) for v in order if v]
    assert rates == sorted((r["tokens_per_s"] for r in rows if r.get("tokens_per_s")), reverse=True)
    assert order[-1] == ""   # the layout that cannot run sorts last


@needs_chromium
def test_plan_run_page_and_the_html_command(tmp_path):
    script = tmp_path / "step.py"
    script.write_text("import torch, warnings\n"
                      "m = torch.nn.Linear(64, 64).to('neuron')\n"
                      "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
                      "for _ in range(2):\n"
                      "    warnings.warn('a warning the user cannot act on')\n"
                      "    m(torch.randn(8, 64, device='neuron')).sum().backward(); opt.step()\n"
                      "print(m.weight.sum().item())\n")
    out, page = tmp_path / "run.json", tmp_path / "run.html"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_NEURONX_DRY_RUN", "TORCH_NEURONX_PLAN_"))}
    p = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "run", "--instance", "trn2.3xlarge", "--json",
                        str(out), "--html", str(page), "--", str(script)], capture_output=True, text=True,
                       timeout=300, env=env)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert "cannot act" not in p.stderr and "- warning (once, UserWarning at" in p.stdout
    again = tmp_path / "again.html"
    q = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "html", str(out), "-o", str(again)],
                       capture_output=True, text=True, timeout=120)
    assert q.returncode == 0 and again.read_text() == page.read_text()
    _screenshot(page, tmp_path / "run.png")
    dom = _dom(page)
    assert dom.by_id("verdict")["text"] == "fits" and "assumed mode: eager" in dom.by_id("assumptions")["text"]
    sites = [e["text"] for e in dom.within("host-syncs", "td")]
    assert f"{script}:7" in sites and "item" in sites
    assert "a warning the user cannot act on" in " ".join(e["text"] for e in dom.within("notes", "li"))
    assert dom.within("timeline-section", "g", "track")


def test_html_command_names_a_bad_report(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"hello": 1}))
    p = subprocess.run([sys.executable, "-m", "torch_neuronx.plan", "html", str(bad), "-o", str(tmp_path / "x.html")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "is not a plan report" in p.stderr and "REPORT.json" not in p.stdout
