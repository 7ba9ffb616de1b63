"""Figures in the docs and the commands that reproduce them; links between the docs.

A *figure line* is a line of prose or a table row (fenced code is output, not prose) with a
measured quantity: a number followed by a unit of time (ns, us, ms, s, min, CPU s), memory (KiB ...
TiB, KB ... TB), throughput (tokens/s, GB/s, FLOP/s ...), a ratio (1.5x) or a percentage; a default
("default 1 MiB") is a setting and does not count.
A figure is *reproducible* when a command sits in the same section (between two headings) within
`WINDOW` lines of it, a table row counting from its table's first or last line (the command above
a table covers the whole table), or when its paragraph cites a public source (a link, a documentation
file, a section of docs/hardware-sources.md such as `[C1]`; a table's "source" or "basis" column or
the line right under the table): quoted hardware facts are read, not measured. A command is a fenced shell block or an inline code span
that starts like a command line (`python ...`, `torchrun ...`, `neuron-ls`, `VAR=... python ...`) or
names a script of benchmarks/ or examples/ (`benchmarks/plan_cost.py`: each prints its figures).

    python -m tests.doc_figures            # per-page counts of figure lines without a command
    python -m tests.doc_figures --list     # the lines themselves
    python -m tests.doc_figures --links    # relative links whose file or heading does not exist
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WINDOW = 20

_UNIT = (r"(?:ns|us|µs|ms|s|sec|min|h|KiB|MiB|GiB|TiB|KB|MB|GB|TB|"
         r"tokens/s|tok/s|samples/s|steps/s|[GTPM]?FLOP/s|[GTPM]?FLOPs|GB/s|GiB/s|MB/s|Gbps|"
         r"%|CPU s|CPU seconds|seconds|minutes|hours)")
# A number (1, 1.5, 88,000, 1e-3) then a unit that ends the token, or a ratio written "1.5x" ("2 x CP",
# "2x2" and "x86" are not ratios). A default ("default 1 MiB") is a setting, not a measurement.
FIGURE = re.compile(r"(?<!default )(?<!default: )(?<![\w.])\d[\d,]*(?:\.\d+)?(?:e-?\d+)?"
                    r"(?:\s?" + _UNIT + r"|x)(?![\w/])")
_COMMAND_START = (r"(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:python3?|torchrun|pytest|neuron-ls|neuron-top|neuron-monitor|"
                  r"/usr/bin/time|\.ci/|accelerate|uptime|(?:benchmarks|examples)/\w+\.py)\b")
INLINE_COMMAND = re.compile(r"`" + _COMMAND_START + r"[^`]*`")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^#{1,6}\s")
# A public source: a link, a documentation file (`trainium2_arch.rst`) or a section of hardware-sources.md.
SOURCE = re.compile(r"https?://|\.(?:rst|html|pdf|ipynb)\b|hardware-sources(?:\.md)?\)?[ #]?[A-H]\d|[\[(][A-H]\d[\])]")


@dataclass(frozen=True)
class Figure:
    page: str
    line: int
    text: str


def _blocks(lines: list[str]):
    """(line index, kind, text) for each line: kind is 'fence', 'code' (inside a fence) or 'prose'."""
    inside = False
    for i, text in enumerate(lines):
        if FENCE.match(text):
            inside = not inside
            yield i, "fence", text
        else:
            yield i, "code" if inside else "prose", text


def figures_without_command(path: Path) -> tuple[list[Figure], int]:
    """(figure lines with no command near them, number of figure lines) of one markdown page."""
    lines = path.read_text().splitlines()
    section = [0] * len(lines)
    commands: list[int] = []
    figures: list[int] = []
    current = 0
    fence_open = None
    for i, kind, text in _blocks(lines):
        if kind == "prose" and HEADING.match(text):
            current += 1
        section[i] = current
        if kind == "fence":
            fence_open = i if fence_open is None else None
        elif kind == "code":
            if re.match(r"\s*(\$\s*)?" + _COMMAND_START, text):
                commands.append(fence_open if fence_open is not None else i)
        else:
            if INLINE_COMMAND.search(text):
                commands.append(i)
            if FIGURE.search(_without_code(text)):
                figures.append(i)
    paragraph = _paragraphs(lines)
    sourced = {paragraph[i] for i, kind, text in _blocks(lines) if kind == "prose" and SOURCE.search(text)}
    figures = [i for i in figures if paragraph[i] not in sourced]
    table_span = _table_spans(lines)
    # A table with a source column quotes each row's source (a row saying "same" quotes the one above).
    figures = [i for i in figures if not (i in table_span and _has_source_column(lines, table_span[i][0]))]
    missing = []
    for i in figures:
        first, last = table_span.get(i, (i, i))
        if not any(section[c] == section[i] and first - WINDOW <= c <= last + WINDOW for c in commands):
            missing.append(Figure(_name(path), i + 1, lines[i].strip()))
    return missing, len(figures)


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _without_code(text: str) -> str:
    """The line without its inline code spans (a flag such as `--ranks 64` or a file name is no figure)."""
    return re.sub(r"`[^`]*`", "", text)


def _table_spans(lines: list[str]) -> dict[int, tuple[int, int]]:
    """{row index: (first, last) index of its table} for every markdown table row."""
    spans: dict[int, tuple[int, int]] = {}
    i = 0
    while i < len(lines):
        if lines[i].lstrip().startswith("|"):
            j = i
            while j + 1 < len(lines) and lines[j + 1].lstrip().startswith("|"):
                j += 1
            for k in range(i, j + 1):
                spans[k] = (i, j)
            i = j + 1
        else:
            i += 1
    return spans


def _paragraphs(lines: list[str]) -> list[int]:
    """A paragraph number per line: runs of non-blank lines (a table and the line under it are one)."""
    number, out = 0, []
    for text in lines:
        if not text.strip() or HEADING.match(text):
            number += 1
        out.append(number)
    return out


def _has_source_column(lines: list[str], first: int) -> bool:
    header = [cell.strip().lower() for cell in lines[first].strip().strip("|").split("|")]
    return "source" in header or "basis" in header


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip("# ").strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def broken_links(paths: list[Path] | None = None) -> list[str]:
    """'page:line: target' for each relative link whose file, or heading in that file, does not exist."""
    broken = []
    for page in paths or pages():
        lines = page.read_text().splitlines()
        for i, kind, text in _blocks(lines):
            if kind != "prose":
                continue
            for target in LINK.findall(_without_code(text)):
                if re.match(r"[a-z]+:", target):
                    continue
                file, _, anchor = target.partition("#")
                dest = (page.parent / file).resolve() if file else page
                if not dest.exists():
                    broken.append(f"{_name(page)}:{i + 1}: {target}")
                elif anchor and dest.suffix == ".md":
                    anchors = {_anchor(h) for h in dest.read_text().splitlines() if HEADING.match(h)}
                    if anchor not in anchors:
                        broken.append(f"{_name(page)}:{i + 1}: {target} (no such heading)")
    return broken


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print each figure line that has no command")
    parser.add_argument("--links", action="store_true", help="print broken relative links instead")
    parser.add_argument("paths", nargs="*", type=Path, help="markdown pages (default: README.md and docs/*.md)")
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.paths] or pages()
    if args.links:
        broken = broken_links(paths)
        print("\n".join(broken) or "no broken links")
        return 1 if broken else 0
    total_missing = total = 0
    for page in paths:
        missing, count = figures_without_command(page)
        total_missing += len(missing)
        total += count
        if args.list:
            for f in missing:
                print(f"{f.page}:{f.line}: {f.text[:140]}")
        elif count:
            print(f"{len(missing):5d} of {count:5d}  {_name(page)}")
    print(f"{total_missing} of {total} figure lines have no command within {WINDOW} lines in their section")
    return 0


if __name__ == "__main__":
    sys.exit(main())
