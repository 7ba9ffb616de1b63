"""How every report, tool and benchmark of torch-neuronx writes bytes, seconds, counts and tables.

One formatter for the whole product, so a figure reads the same in a plan report, in
`torch.neuron.memory_summary()`, in neuron-top and in a benchmark's output. Bytes are binary units
with their IEC names (1 KiB = 1024 B, 1 MiB = 1024 KiB, 1 GiB = 1024 MiB): HBM capacities and
allocator block sizes are powers of two, and `torch.cuda.memory_summary` writes them the same way.
It sits in the runtime layer so that every layer above may import it.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
_BINARY_UNITS = (("GiB", GiB), ("MiB", MiB), ("KiB", KiB))


def size(n, digits: int = 2, space: str = " ") -> str:
    """Bytes in binary units: `21.58 GiB`, `488.00 MiB`, `1.50 KiB`, `512 B`; `-` for None.

    GiB is the largest unit (a core's HBM reads as `96.00 GiB`, a cluster's as `1,536.00 GiB`), with
    thousands separated; `digits` decimals below it."""
    if n is None:
        return "-"
    for unit, scale in _BINARY_UNITS:
        if abs(n) >= scale:
            return f"{n / scale:,.{digits}f}{space}{unit}"
    return f"{int(n):,}{space}B"


def seconds(s) -> str:
    """`2.013 s`, `47.1 ms`, `6 us` (four significant figures below a second); `-` for None."""
    if s is None:
        return "-"
    if abs(s) >= 1:
        return f"{s:,.3f} s"
    if abs(s) >= 1e-3:
        return f"{s * 1e3:.4g} ms"
    return f"{s * 1e6:.4g} us"


def number(v, digits: int = 4) -> str:
    """A figure as people read it: thousands separated, `digits` significant figures below 1,000."""
    if v is None:
        return "-"
    if isinstance(v, int) or (abs(v) >= 1000 and float(v).is_integer()):
        return f"{int(v):,}"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


def plural(n, word: str, many: str | None = None) -> str:
    """`1 replica`, `2 replicas`, `1,024 ranks`."""
    return f"{number(n)} {word if n == 1 else (many or word + 's')}"


def markdown_table(header: Sequence[str], rows: Iterable[Sequence], align: str | None = None) -> list[str]:
    """The lines of a markdown table. `align` has one letter per column: `l` (`---`) or `r` (`---:`);
    cells are written with str()."""
    header = list(header)
    align = align or "l" * len(header)
    if len(align) != len(header) or set(align) - {"l", "r"}:
        raise ValueError(f"align={align!r}: give one letter per column ({len(header)}), each 'l' or 'r'.")
    lines = [_row(header),
             "|" + "".join("---:|" if a == "r" else "---|" for a in align)]
    for row in rows:
        row = list(row)
        if len(row) != len(header):
            raise ValueError(f"a table row has {len(row)} cells, the header {len(header)}: {row!r}")
        lines.append(_row(row))
    return lines


def _row(cells) -> str:
    return "|" + "|".join(f" {c} " if str(c) else " " for c in cells) + "|"


def counts_since(now: dict[str, int], base: dict[str, int]) -> dict[str, int]:
    """{key: count} gained from `base` to `now` (keys that gained nothing are left out)."""
    return {k: n - base.get(k, 0) for k, n in now.items() if n > base.get(k, 0)}
