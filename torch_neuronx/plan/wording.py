"""How plan reports say things: plurals, numbers with thousands separators, units, and the
assumptions a report rests on (stated at the top of every report, markdown and HTML)."""
from __future__ import annotations


def plural(n, word: str, many: str | None = None) -> str:
    """`1 replica`, `2 replicas`, `1,024 ranks`."""
    return f"{number(n)} {word if n == 1 else (many or word + 's')}"


def number(v, digits: int = 4) -> str:
    """A figure as people read it: thousands separated, `digits` significant figures below 1,000."""
    if v is None:
        return "-"
    if isinstance(v, int) or (abs(v) >= 1000 and float(v).is_integer()):
        return f"{int(v):,}"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


def seconds(s) -> str:
    """`2.013 s`, `47.1 ms`, `6.0 us`."""
    if s is None:
        return "-"
    if abs(s) >= 1:
        return f"{s:,.3f} s"
    if abs(s) >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} us"


def size(n) -> str:
    """Bytes in binary units: `21.58 GiB`, `488.00 MiB`."""
    if n is None:
        return "-"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            return f"{n / scale:,.2f} {unit}"
    return f"{n:,} B"


def overridden_assumptions(assumptions) -> dict:
    """The cost model's assumptions that differ from their documented defaults (estimate/assumptions.py)."""
    from dataclasses import fields

    from ..estimate.assumptions import DEFAULTS

    return {f.name: getattr(assumptions, f.name) for f in fields(DEFAULTS)
            if getattr(assumptions, f.name) != getattr(DEFAULTS, f.name)}


def overridden_settings() -> dict:
    """Dry-run settings taken from the environment instead of their defaults."""
    import os

    from . import config

    out = {}
    for name in (config.LARGE_BYTES, config.MAX_SYNCS_PER_SITE):
        if os.environ.get(name):
            out[name] = os.environ[name]
    return out


def assumption_lines(mode: str, overridden: dict) -> list[str]:
    """The two lines every report starts with after its title."""
    over = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in overridden.items())
    return [f"assumed mode: **{mode}**; cost-model assumptions: "
            + (f"overridden: {over} (the rest as documented in docs/estimate.md)" if over
               else "the documented defaults (docs/estimate.md)")]
