"""A plan's report as one self-contained HTML page (inline CSS, SVG and a few lines of JS; nothing
is fetched): the summary, per-core HBM at the peak against capacity, the time breakdown, the
estimated timeline of one core, collectives per group, host syncs per call site, notes; for a
sweep, one sortable row per layout.

    python -m torch_neuronx.plan html REPORT.json -o OUT.html    # any plan's --json
    ... --html OUT.html                                           # on every plan command

It reads the report dict alone (the JSON of `plan run`, `generate`, `train` or `sweep`).
"""
from __future__ import annotations

import argparse
import html
import json
import math
import sys

from ._report_ranges import basis_lines, key_of
from ._report_ranges import text as range_text
from .report_model import normalized
from ._wording import deployed_layout_lines, number, plural, seconds, size, train_layout_lines

# memory categories in stacking order, with their colours (the same in every bar and legend)
MEMORY = [("parameters", "#4e79a7"), ("gradients", "#f28e2b"), ("optimizer_state", "#e15759"),
          ("kv_cache", "#76b7b2"), ("activations", "#59a14f"), ("other", "#b07aa1")]
PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac", "#86bcb6", "#d37295", "#8cd17d"]

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;background:#f4f5f7;color:#1f2328}
main{max-width:1180px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:22px;margin:0 0 6px} h2{font-size:16px;margin:0 0 10px;color:#3b4350}
section{background:#fff;border:1px solid #dde1e6;border-radius:8px;padding:16px 18px;margin:14px 0}
.badge{display:inline-block;padding:2px 10px;border-radius:12px;font-weight:600;font-size:13px;margin-left:8px;vertical-align:3px}
.fits{background:#dff3e4;color:#1a7f37} .nofit{background:#ffe1e1;color:#b3261e}
.assume{color:#57606a;margin:4px 0 0}
table{border-collapse:collapse;width:100%} th,td{text-align:left;padding:5px 10px;border-bottom:1px solid #eceff2}
th{font-weight:600;color:#57606a;background:#fafbfc} #sweep td,#sweep th{white-space:nowrap}
#sweep td.wrap{white-space:normal;font-size:12px;color:#57606a;min-width:280px} td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
table.kv td:first-child{color:#57606a;width:38%}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:10px}
.card{border:1px solid #e3e6ea;border-radius:8px;padding:10px 12px;background:#fbfcfd}
.card .v{font-size:20px;font-weight:600} .card .k{color:#57606a;font-size:12px}
.legend span{display:inline-block;margin-right:14px;font-size:12px;color:#3b4350}
.legend i{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px;vertical-align:-1px}
svg text{font:12px system-ui,sans-serif;fill:#3b4350}
th.sort{cursor:pointer;user-select:none} th.sort:after{content:" \\2195";color:#aab1ba}
th.asc:after{content:" \\2191";color:#1f2328} th.desc:after{content:" \\2193";color:#1f2328}
tr.no td{color:#8c959f} .note{color:#57606a;font-size:12px}
ul.notes{margin:0;padding-left:18px} ul.notes li{margin:3px 0} code{font-size:12px;background:#f1f3f5;padding:0 3px;border-radius:3px}
"""

SORT_JS = """
document.querySelectorAll('table.sortable').forEach(function(t){
  t.querySelectorAll('th').forEach(function(th,i){
    th.classList.add('sort');
    th.addEventListener('click',function(){
      var asc=!th.classList.contains('asc');
      t.querySelectorAll('th').forEach(function(h){h.classList.remove('asc','desc')});
      th.classList.add(asc?'asc':'desc');
      var rows=Array.from(t.tBodies[0].rows);
      rows.sort(function(a,b){
        var x=a.cells[i].dataset.v, y=b.cells[i].dataset.v;
        var nx=parseFloat(x), ny=parseFloat(y);
        if(isNaN(nx)!==isNaN(ny)) return isNaN(nx)?1:-1;   // rows without the figure last
        var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:(x||'').localeCompare(y||'');
        return asc?c:-c;});
      rows.forEach(function(r){t.tBodies[0].appendChild(r)});
    });
  });
});
"""


def colors(names) -> dict:
    """One colour per kind of work, in the order given (the same in the breakdown and the timeline)."""
    unique = list(dict.fromkeys(names))
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(unique)}


def esc(v) -> str:
    return html.escape(str(v), quote=True)


# ---- pieces --------------------------------------------------------------------------------------
def _section(title: str, body: str, sid: str) -> str:
    return f'<section id="{sid}"><h2>{esc(title)}</h2>{body}</section>'


def _kv(rows) -> str:
    return '<table class="kv">' + "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in rows) + "</table>"


def _basis(r: dict) -> str:
    """What the figures' calibrated ranges rest on (plan/_report_ranges.py), under the cards; '' without."""
    basis = basis_lines(r)
    if not basis:
        return ""
    items = "".join(f"<li>{esc(line[2:])}</li>" for line in basis[1:])
    return f'<p class="note" id="ranges">{esc(basis[0])}</p>' + (f'<ul class="note">{items}</ul>' if items else "")


def _cards(items) -> str:
    """Cards of (label, value) or (label, value, a line under the label: the figure's calibrated range)."""
    return '<div class="cards">' + "".join(
        f'<div class="card"><div class="v">{esc(v)}</div><div class="k">{esc(k)}</div>'
        + (f'<div class="k range">{esc(more[0])}</div>' if more and more[0] else "") + "</div>"
        for k, v, *more in items) + "</div>"


def _table(head, rows, cls="", numeric=()) -> str:
    th = "".join(f'<th class="{"n" if i in numeric else ""}">{esc(h)}</th>' for i, h in enumerate(head))
    body = "".join("<tr>" + "".join(f'<td class="{"n" if i in numeric else ""}">{esc(c)}</td>'
                                    for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>'


def _legend(items) -> str:
    return '<div class="legend">' + "".join(f'<span><i style="background:{c}"></i>{esc(k)}</span>'
                                            for k, c in items) + "</div>"


def memory_bars(cores: list[tuple[str, dict, int, int]]) -> str:
    """One stacked bar per core: (label, {category: bytes}, peak bytes, capacity bytes)."""
    width, left, row = 1080, 90, 34
    scale_max = max(max(cap, peak) for _, _, peak, cap in cores) or 1
    plot = width - left - 250   # the used / capacity text goes right of the bar
    parts = []
    for i, (label, parts_bytes, peak, cap) in enumerate(cores):
        y = 10 + i * row
        parts.append(f'<text x="0" y="{y + 16}">{esc(label)}</text>')
        parts.append(f'<rect class="capacity" x="{left}" y="{y}" width="{plot * cap / scale_max:.1f}" height="22" '
                     f'fill="#eef0f3" stroke="#c7ccd3"><title>capacity {size(cap)}</title></rect>')
        x = float(left)
        for name, color in MEMORY:
            b = parts_bytes.get(name) or 0
            if b <= 0:
                continue
            w = plot * b / scale_max
            parts.append(f'<rect class="mem {name}" x="{x:.1f}" y="{y}" width="{max(w, 0.5):.1f}" height="22" '
                         f'fill="{color}"><title>{esc(name.replace("_", " "))}: {size(b)}</title></rect>')
            x += w
        cx = left + plot * cap / scale_max
        parts.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y - 4}" y2="{y + 26}" stroke="#b3261e" stroke-width="2"/>')
        used = f"{size(peak)} of {size(cap)} ({100 * peak / cap:.0f}%)" if cap else size(peak)
        parts.append(f'<text x="{max(cx, x) + 10:.1f}" y="{y + 16}" class="peak">{esc(used)}</text>')
    h = 20 + len(cores) * row
    first = cores[0][1]   # the legend gives the first core's bytes (the bars' tooltips every core's)
    legend = _legend([(n.replace("_", " ") + (f" {size(first[n])}" if first.get(n) else ""), c) for n, c in MEMORY]
                     + [("capacity", "#b3261e")])
    return (f'<svg id="hbm" width="{width}" height="{h}" viewBox="0 0 {width} {h}">{"".join(parts)}</svg>' + legend)


def bars(items: list[tuple[str, float]], unit=seconds, sid="time", palette: dict | None = None) -> str:
    """Horizontal bars, largest first: (label, value)."""
    palette = palette or colors(k for k, _ in items)
    items = [(k, v) for k, v in items if v and v > 0]
    if not items:
        return '<p class="note">nothing estimated</p>'
    width, left, row = 1080, 230, 24
    top = max(v for _, v in items)
    total = sum(v for _, v in items)
    out = []
    for i, (k, v) in enumerate(items):
        y = 4 + i * row
        w = (width - left - 190) * v / top
        out.append(f'<text x="0" y="{y + 14}">{esc(k)}</text>'
                   f'<rect class="bar" x="{left}" y="{y}" width="{max(w, 1):.1f}" height="17" rx="2" '
                   f'fill="{palette.get(k, "#9aa3ad")}"><title>{esc(k)}: {unit(v)}</title></rect>'
                   f'<text x="{left + w + 8:.1f}" y="{y + 14}">{esc(unit(v))} ({100 * v / total:.1f}%)</text>')
    h = 8 + len(items) * row
    return f'<svg id="{sid}" width="{width}" height="{h}" viewBox="0 0 {width} {h}">{"".join(out)}</svg>'


def _ticks(end: float, n: int = 8) -> list[float]:
    """Round tick positions (1, 2 or 5 x a power of ten) from 0 to `end`."""
    if end <= 0:
        return [0.0]
    raw = end / n
    base = 10 ** math.floor(math.log10(raw))
    step = next(m * base for m in (1, 2, 5, 10) if m * base >= raw)
    return [i * step for i in range(int(end / step) + 1)]


def timeline_svg(tl: dict, palette: dict | None = None) -> str:
    """One row per kind of work; each merged span a bar at its estimated start and duration."""
    rows = tl["rows"]
    palette = {**colors(r["category"] for r in rows), **(palette or {})}
    end = tl["end_s"] - tl["start_s"] or 1e-9
    width, left, row = 1080, 210, 22
    plot = width - left - 16
    out = []
    for i, r in enumerate(rows):
        y = 6 + i * row
        color = palette.get(r["category"], "#9aa3ad")
        out.append(f'<text x="0" y="{y + 13}">{esc(r["category"])}</text>')
        out.append(f'<rect x="{left}" y="{y}" width="{plot}" height="16" fill="#f6f7f9"/>')
        spans = "".join(f'<rect x="{left + plot * s / end:.2f}" y="{y}" width="{max(plot * d / end, 0.6):.2f}" '
                        f'height="16"/>' for s, d in r["spans"])
        out.append(f'<g class="track" fill="{color}"><title>{esc(r["category"])}: {plural(r["count"], "event")}, '
                   f'{seconds(r["seconds"])}</title>{spans}</g>')
    y = 6 + len(rows) * row + 4
    for t in _ticks(end):
        x = left + plot * t / end
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="4" y2="{y}" stroke="#e1e4e8"/>'
                   f'<text x="{x:.1f}" y="{y + 14}" text-anchor="middle">{esc(seconds(t) if t else "0")}</text>')
    h = y + 22
    return (f'<svg id="timeline" width="{width}" height="{h}" viewBox="0 0 {width} {h}">{"".join(out)}</svg>'
            f'<p class="note">{esc(tl["core"])}, estimated device time; spans closer than 1/1,200 of the run are '
            f'drawn as one. The Chrome trace (<code>--trace</code>) has every event.</p>')


def notes_list(notes: list[dict]) -> str:
    from ._notes import times

    items = []
    ops = [n for n in notes if n["kind"] == "unmodelled op"]
    if ops:
        items.append("ops without a cost model (counted as Vector-engine ops by element count): " + ", ".join(
            f"<code>{esc(n['text'])}</code>" + (f" ({esc(times(n['count']))})" if n["count"] else "") for n in ops))
    for n in notes:
        if n["kind"] != "unmodelled op":
            label = {"ignored mode": "ignored", "warning": "warning", "log": "log"}.get(n["kind"], n["kind"])
            items.append(f"<b>{esc(label)}</b> ({esc(times(n['count']))}, {esc(n['where'])}): "
                         f"{esc((n['text'] or '').splitlines()[0] if n['text'] else '')}")
    return '<ul class="notes">' + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


# ---- whole pages ---------------------------------------------------------------------------------
def _page(title: str, fits: bool | None, assume: str, sections: list[str]) -> str:
    badge = "" if fits is None else (f'<span id="verdict" class="badge fits">fits</span>' if fits
                                     else f'<span id="verdict" class="badge nofit">does NOT fit</span>')
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f'<meta name="viewport" content="width=device-width,initial-scale=1"><style>{CSS}</style></head>'
            f'<body><main><h1>{esc(title)}{badge}</h1><p class="assume" id="assumptions">{assume}</p>'
            + "".join(sections) + f'<p class="note">Estimates from the documented cost model '
            f'(docs/estimate.md), not measurements.</p></main><script>{SORT_JS}</script></body></html>')


def _assume_html(mode: str, overridden: dict) -> str:
    over = ", ".join(f"<code>{esc(k)}={esc(v)}</code>" for k, v in (overridden or {}).items())
    return (f"assumed mode: <b>{esc(mode)}</b> &middot; cost-model assumptions: "
            + (f"overridden: {over}" if over else "the documented defaults"))


def ranks_text(group: str) -> str:
    """A group's global ranks, short: `0-31 (32 ranks)`, `0, 4, ..., 28 (8 ranks)`, `0, 32`."""
    try:
        ranks = [int(v) for v in group.split(",")]
    except ValueError:
        return group
    if len(ranks) <= 4:
        return ", ".join(map(str, ranks))
    step = ranks[1] - ranks[0]
    if all(b - a == step for a, b in zip(ranks, ranks[1:])):
        body = f"{ranks[0]}-{ranks[-1]}" if step == 1 else f"{ranks[0]}, {ranks[1]}, ..., {ranks[-1]}"
        return f"{body} ({len(ranks)} ranks)"
    return f"{', '.join(map(str, ranks[:3]))}, ... ({len(ranks)} ranks)"


def _collectives_rows(collectives: dict) -> list:
    """One row per kind and group; bytes and seconds are per kind (on its first group's row)."""
    rows = []
    for kind, c in collectives.items():
        groups = c.get("groups") or {"-": c["count"]}
        note = "" if len(groups) == 1 else f" (all {len(groups)} groups)"
        for i, (group, n) in enumerate(groups.items()):
            rows.append((kind, ranks_text(group), number(n), f"{size(c['bytes'])}{note}" if i == 0 else "",
                         f"{seconds(c['seconds'])}{note}" if i == 0 else ""))
    return rows


def _syncs(r: dict) -> str:
    syncs = r.get("host_syncs") or []
    if not syncs:
        return '<p class="note">none</p>'
    from ._notes import short_path

    return _table(["call site", "kind", "count"],
                  [(short_path(s["site"]), s["kind"], number(s["count"])) for s in syncs[:40]], numeric=(2,))


def serve_page(r: dict) -> str:
    """`plan serve` report: bench serve's figures, the engine's steps and KV cache, the graphs priced."""
    b, e = r["bench_serve"], r["engine"]
    title = f"plan serve: {r['model_type']} on {r['layout']}"
    cards = [("requests/s", number(b["request_throughput"]), "request_throughput"),
             ("output tokens/s", number(b["output_throughput"]), "output_throughput"),
             ("mean TTFT", seconds(b["mean_ttft_ms"] / 1e3), "mean_ttft_ms"),
             ("mean TPOT", seconds(b["mean_tpot_ms"] / 1e3), "mean_tpot_ms"),
             ("peak HBM per core", size(r["peak_hbm_bytes_per_core"]), None),
             ("capacity per core", size(r["hbm_capacity_bytes_per_core"]), None)]
    cards = [(k, v, range_text(b, key).strip(" ()") if key else "") for k, v, key in cards]
    latency = [(name, *(f"{b[f'{k}_{key}_ms']:.2f}" for k in ("mean", "median", "p90", "p99")))
               for name, key in (("TTFT", "ttft"), ("TPOT", "tpot"), ("ITL", "itl"), ("E2E latency", "e2el"))]
    engine = [("engine steps", number(e["steps"])), ("device time", seconds(e["device_s"])),
              ("host time", seconds(e["host_s"])), ("preemptions", number(e["preemptions"])),
              ("KV cache", f"{number(e['kv_cache_blocks'])} blocks of {e['block_size']} tokens"),
              ("KV cache used (peak / mean)", f"{e['kv_cache_usage_peak']:.1%} / {e['kv_cache_usage_mean']:.1%}"),
              ("max-model-len / max-num-seqs / max-num-batched-tokens",
               f"{e['max_model_len']} / {e['max_num_seqs']} / {e['max_num_batched_tokens']}")]
    graphs = [("prefill" if g["kind"] == "cte" else "decode", g["bucket"], f"{g['seconds'] * 1e3:.3f}", g["calls"])
              for g in r["graphs"]]
    sections = [_section("Summary", _cards(cards), "summary"),
                _section("Latency in ms (vllm bench serve's figures)",
                         _table(["", "mean", "p50", "p90", "p99"], latency, numeric=(1, 2, 3, 4)), "latency"),
                _section("vLLM's engine", _kv(engine), "engine"),
                _section("Graphs priced (bucket, ms per step, steps)",
                         _table(["graph", "bucket", "ms", "steps"], graphs, numeric=(1, 2, 3)), "graphs"),
                _section("Assumptions", _kv(list(r["assumptions_serving"].items())), "serving-assumptions")]
    c = r.get("compile_deployment")
    if c:
        hours = lambda s: "unknown" if s is None else f"{s / 3600:.2f} h"
        rows = [(("prefill" if g["kind"] == "cte" else "decode"), g["bucket"],
                 "unknown" if "estimate_s" not in g else f"{g['estimate_s']:.0f} ({g['low_s']:.0f} to {g['high_s']:.0f})",
                 "unknown" if not g["flops_per_core"] else f"{g['flops_per_core']:.3g} ({g['flops_from']})")
                for g in c["graphs"]]
        sections.insert(-1, _section(
            f"What a deployment compiles: {c['count']} graphs, neuronx-cc about {hours(c['total_s'])} "
            f"({hours(c['total_low_s'])} to {hours(c['total_high_s'])})",
            _table(["graph", "bucket", "compile s (range)", "FLOPs per core"], rows, numeric=(1,))
            + f'<p class="note">{esc(c["fit"])}; {esc(c["assumption"])}</p>', "compile"))
    if basis_lines(r):
        sections[0] = _section("Summary", _cards(cards) + _basis(r), "summary")
    return _page(title, r["fits"], _assume_html("serve", r.get("assumptions_overridden")), sections)


def model_page(r: dict) -> str:
    """`plan generate` / `plan train` report (`plan serve`'s: serve_page)."""
    if "bench_serve" in r:
        return serve_page(r)
    kind = "generate" if "ttft_ms" in r else "train"
    title = f"plan {kind}: {r['model_type']} on {r['layout']}"
    mode = r.get("mode") or ("compiled" if r.get("compiled") is True else "eager")
    if kind == "generate":
        cards = [("TTFT", seconds(r["ttft_ms"] / 1e3) if r["ttft_ms"] is not None else "-"),
                 ("per output token", seconds(r["tpot_ms"] / 1e3) if r["tpot_ms"] is not None else "-"),
                 ("output tokens/s (one TP group)", number(r["output_tokens_per_s"])),
                 (f"output tokens/s ({plural(r['replicas'], 'replica')})", number(r["output_tokens_per_s_all_replicas"]))]
        setup = [("batch", number(r["batch"])), ("input tokens", number(r["input_tokens"])),
                 ("output tokens", number(r["output_tokens"])), *deployed_layout_lines(r)]
    else:
        cards = [("step time", seconds(r["step_time_s"])), ("tokens/s", number(r["tokens_per_s"])),
                 ("MFU", f"{100 * r['mfu']:.1f}%" if r.get("mfu") is not None else "-"),
                 ("gradient accumulation", plural(r["grad_accum_steps"], "micro-step"))]
        setup = [("micro-batch", number(r["micro_batch"])), ("global batch", number(r["global_batch"])),
                 ("sequence length", number(r["seq_len"])),
                 ("gradient checkpointing", "yes" if r["gradient_checkpointing"] else "no"), *train_layout_lines(r)]
    peak, cap = r["peak_hbm_bytes_per_core"], r["hbm_capacity_bytes_per_core"]
    cards = [("peak HBM per core", size(peak)), ("capacity per core", size(cap))] + [
        (k, v, range_text(r, key_of(k)).strip(" ()")) for k, v in cards]   # written by the plan (plan/_report_ranges.py)
    summary = _cards(cards) + "<br>" + _kv([
        ("instance", f"{r['instance']} x {r['nodes']}, LNC={r['lnc']}"),
        ("layout", f"{r['layout']} ({plural(r['world_size'], 'rank')})"),
        ("model", f"{r['model_type']}, {number(r['parameters'] or 0)} parameters, {r['dtype']}"),
        *setup, ("run", "dry run (phantom device memory)" if r["dry_run"] else "real run")])
    summary += _basis(r)
    if r.get("oom"):
        summary += f'<p class="nofit" id="oom">out of memory: {esc(r["oom"])}</p>'
    parts = dict(r.get("memory_at_peak_bytes_per_core") or {})
    parts.pop("at_allocated_bytes", None)
    if not parts:
        parts = {k: v for k, v in (r["memory_breakdown_bytes_per_core"] or {}).items() if v}
        parts["activations"] = max(0, peak - sum(parts.values()))
    kinds = list((r.get("time_breakdown_s") or {}).items())
    palette = colors([k for k, _ in kinds] + [row["category"] for row in (r.get("timeline") or {}).get("rows", [])])
    sections = [_section("Summary", summary, "summary"),
                _section("HBM per core at the peak", memory_bars([("neuron:0", parts, peak, cap)]), "memory"),
                _section("Time by kind of work (estimated)", bars(kinds, palette=palette), "time-breakdown")]
    sections += _detail_sections(r, r.get("collective_groups") or r.get("collectives") or {}, palette)
    return _page(title, r["fits"], _assume_html(mode, r.get("assumptions_overridden")), sections)


def _detail_sections(r: dict, coll: dict, palette=None) -> list[str]:
    """The sections both pages end with: one core's timeline, collectives per group, host syncs, notes."""
    out = []
    if r.get("timeline"):
        timeline = timeline_svg(r["timeline"], palette) if palette is not None else timeline_svg(r["timeline"])
        out.append(_section("Estimated timeline of one core", timeline, "timeline-section"))
    if coll:
        out.append(_section("Collectives per group", _table(
            ["kind", "group (global ranks)", "calls", "bytes", "seconds"], _collectives_rows(coll),
            numeric=(2, 3, 4)), "collectives"))
    if r.get("compile_budget"):   # plan/_compile_budget.py: graphs, causes, warm cache, neuronx-cc time
        from ._compile_budget import table as budget_table

        title, head, rows, lines = budget_table(r["compile_budget"])
        items = "".join(f"<li>{esc(line)}</li>" for line in lines)
        out.append(_section(title, _table(head, rows, numeric=(4, 5)) + f"<ul>{items}</ul>", "compile-budget"))
    out.append(_section(f"Host syncs: {number(r.get('host_sync_count') or 0)}", _syncs(r), "host-syncs"))
    if r.get("notes"):
        out.append(_section("Notes", notes_list(r["notes"]), "notes"))
    return out


def dry_run_page(r: dict) -> str:
    """`plan run` (a script's dry run) report; a merged multi-rank report shows its first rank."""
    merged = None
    if "cores" not in r and "ranks" in r:
        merged, r = r, r["ranks"][str(r["ranks_run"][0])]
    comp = r["compiled"]
    mode = r.get("mode") or ("compiled" if comp["distinct_graphs"] else "eager")
    cards = [("peak HBM per core", size(r["peak_hbm_bytes_per_core"])),
             ("capacity per core", size(r["hbm_capacity_bytes_per_core"])),
             ("estimated total", seconds(r["estimated_total_s"]), range_text(r, "estimated_total_s").strip(" ()")),
             ("per optimizer step", seconds(r["estimated_step_s"]), range_text(r, "estimated_step_s").strip(" ()")),
             ("MFU", f"{100 * r['mfu']:.1f}%"),
             ("host syncs", number(r["host_sync_count"]))]
    rows = [("instance", f"{r['instance']}, LNC={r['lnc']}"),
            ("optimizer steps", number(r["optimizer_steps"])),
            ("compiled graphs", f"{number(comp['distinct_graphs'])} distinct, "
                                f"{plural(comp['recompilations'], 'recompilation')}, "
                                f"{plural(comp['graph_breaks'], 'graph break')}"),
            ("neuron ops", number(r["ops"])), ("planned in", seconds(r["planning_wall_s"]))]
    if merged:
        rows.insert(0, ("job", f"{plural(merged['world_size'], 'rank')}; this page shows rank "
                               f"{merged['ranks_run'][0]} (ranks run: {', '.join(map(str, merged['ranks_run']))})"))
    summary = _cards(cards) + "<br>" + _kv(rows) + _basis(r)   # a rank report's ranges (plan/_run_ranges.py)
    if r["oom"]:
        summary += (f'<p class="nofit" id="oom">out of memory on neuron:{esc(r["oom"]["device"])} at '
                    f'<code>{esc(r["oom"]["site"])}</code>: {esc(r["oom"]["message"])}</p>')
    cores = []
    for c in r["cores"]:
        b = {k: v for k, v in c["breakdown"].items() if k != "at_allocated_bytes"}
        cores.append((f"neuron:{c['device']}", b, c["peak_allocated_bytes"], c["capacity_bytes"]))
    tb = r["time_by_bound_s"]
    items = [("compute-bound", tb["compute_s"]), ("memory-bound", tb["memory_s"]), ("launch", tb["launch_s"]),
             *((f"collective: {k}", c["seconds"]) for k, c in tb["collectives"].items()),
             ("host syncs", tb["host_syncs_s"])]
    sections = [_section("Summary", summary, "summary"),
                _section("HBM per core at the peak", memory_bars(cores) if cores else "-", "memory"),
                _section("Time breakdown (estimated)", bars(sorted(items, key=lambda kv: -kv[1])), "time-breakdown")]
    sections += _detail_sections(r, (r.get("distributed") or {}).get("collectives") or {})
    overridden = (r.get("assumptions") or {}).get("overridden")
    verdict = merged["fits"] if merged else r["fits"]
    return _page(f"plan run on {r['instance']} (LNC={r['lnc']})", verdict, _assume_html(mode, overridden), sections)


SWEEP_HEAD = [("instance", None), ("LNC", None), ("TP", None), ("CP", None), ("FSDP", None), ("DP", None), ("micro", None),
              ("seq", None), ("ckpt", None), ("fits", None), ("peak HBM / core", "n"), ("step time", "n"),
              ("tokens/s", "n"), ("MFU", "n"), ("note", None)]


def sweep_page(rows: list[dict]) -> str:
    body = []
    for r in rows:
        fits = r.get("fits")
        cells = [(r["instance"], r["instance"]), (r["lnc"], r["lnc"]), (r["tp"], r["tp"]), (r.get("cp", 1), r.get("cp", 1)),
                 (r["fsdp"], r["fsdp"]),
                 (r.get("dp", "-"), r.get("dp", "")), (r["micro_batch"], r["micro_batch"]),
                 (number(r["seq_len"]), r["seq_len"]), ("yes" if r["gradient_checkpointing"] else "no", ""),
                 ("-" if fits is None else ("yes" if fits else "NO"), "" if fits is None else int(fits)),
                 (size(r.get("peak_hbm_bytes_per_core")), r.get("peak_hbm_bytes_per_core", "")),
                 (seconds(r.get("step_time_s")), r.get("step_time_s") or ""),
                 (number(r.get("tokens_per_s")), r.get("tokens_per_s") or ""),
                 ("-" if r.get("mfu") is None else f"{100 * r['mfu']:.1f}%", r.get("mfu") or ""),
                 ((r.get("reason") or r.get("error") or (r.get("oom") or ""))[:160], "")]
        tds = "".join(f'<td class="{"n" if SWEEP_HEAD[i][1] else ("wrap" if i == len(cells) - 1 else "")}" '
                      f'data-v="{esc(v)}">{esc(t)}</td>' for i, (t, v) in enumerate(cells))
        body.append(f'<tr class="{"ok" if fits else "no"}">{tds}</tr>')
    head = "".join(f'<th class="{c or ""}">{esc(h)}</th>' for h, c in SWEEP_HEAD)
    table = (f'<table id="sweep" class="sortable"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody>'
             f'</table><p class="note">Click a column to sort. Rows that cannot run say why.</p>')
    n_fit = sum(1 for r in rows if r.get("fits"))
    title = f"plan sweep: {plural(len(rows), 'layout')}, {number(n_fit)} fit"
    return _page(title, None, _assume_html("eager", {}), [_section("Layouts", table, "layouts")])


def render(report) -> str:
    """The page for any plan's report (dict) or a sweep's rows (list)."""
    if isinstance(report, list):
        return sweep_page(report)
    report = normalized(report)   # any schema version, earlier key names included (plan/report_model.py)
    if report["kind"] in ("rank", "merged"):
        return dry_run_page(report)
    return model_page(report)


def write(report, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(render(report))


# ---- `python -m torch_neuronx.plan html` -----------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("report", metavar="REPORT.json", help="the --json of plan run, generate, train or sweep")
    p.add_argument("-o", "--out", required=True, metavar="OUT.html", help="the page to write")


def main(args: argparse.Namespace) -> int:
    try:
        with open(args.report) as f:
            report = json.load(f)
    except (OSError, json.JSONDecodeError) as err:
        print(f"plan html: cannot read REPORT.json {args.report!r}: {err}", file=sys.stderr)
        return 2
    try:
        write(report, args.out)
    except ValueError as err:
        print(f"plan html: {args.report!r} is {err}", file=sys.stderr)
        return 2
    except (KeyError, TypeError) as err:
        print(f"plan html: {args.report!r} is not a plan report (missing {err}); give the --json of "
              f"plan run, generate, train or sweep", file=sys.stderr)
        return 2
    print(f"wrote {args.out}", file=sys.stderr)
    return 0
