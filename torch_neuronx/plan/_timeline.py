"""The estimated timeline of one logical core, small enough to keep in a report (and draw in its
HTML page): per kind of work, its spans merged below `resolution` of the whole run, its seconds
and its event count. The full timeline is the Chrome trace (`--trace`)."""
from __future__ import annotations

WIDTH = 1200   # spans closer than 1/WIDTH of the run are merged (one pixel of a wide drawing)
TOP = 12       # kinds of work kept as their own rows; the rest become "other"


def summary(events, width: int = WIDTH, top: int = TOP) -> dict | None:
    """{"core", "start_s", "end_s", "rows": [{category, seconds, count, spans: [[start, duration]]}]}
    for the first core that has events (times relative to its first event), or None without events."""
    events = list(events)
    if not events:
        return None
    device = events[0].device
    mine = [e for e in events if e.device == device]
    t0 = min(e.start_s for e in mine)
    t1 = max(e.start_s + e.seconds for e in mine)
    gap = (t1 - t0) / width
    seconds: dict[str, float] = {}
    for e in mine:
        seconds[e.category] = seconds.get(e.category, 0.0) + e.seconds
    keep = sorted(seconds, key=lambda c: -seconds[c])[:top]
    rows: dict[str, dict] = {}
    for e in sorted(mine, key=lambda e: e.start_s):
        cat = e.category if e.category in keep else "other"
        row = rows.setdefault(cat, {"category": cat, "seconds": 0.0, "count": 0, "spans": []})
        row["seconds"] += e.seconds
        row["count"] += 1
        start, end = e.start_s - t0, e.start_s - t0 + e.seconds
        spans = row["spans"]
        if spans and start <= spans[-1][0] + spans[-1][1] + gap:
            spans[-1][1] = max(spans[-1][1], end - spans[-1][0])
        else:
            spans.append([start, end - start])
    ordered = sorted(rows.values(), key=lambda r: (r["category"] == "other", -r["seconds"]))
    return {"core": f"neuron:{device}", "start_s": t0, "end_s": t1, "rows": ordered}
