"""tests/doc_figures.py: what counts as a figure line, what counts as the command that reproduces
it, and which links are broken (on small pages written here, so the rules are pinned down)."""
from __future__ import annotations

from pathlib import Path

from tests import doc_figures


def page(tmp_path: Path, text: str, name: str = "page.md") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def missing(path: Path) -> list[int]:
    return [f.line for f in doc_figures.figures_without_command(path)[0]]


def test_a_measured_figure_with_no_command_is_counted(tmp_path):
    path = page(tmp_path, "# T\n\nThe step took 12.5 ms and used 3.2 GiB, 1.5x faster.\n")
    assert missing(path) == [3]


def test_a_command_in_the_same_section_reproduces_the_figure(tmp_path):
    text = "# T\n\n```bash\npython benchmarks/x.py --threads 1\n```\n\nThe step took 12.5 ms.\n"
    assert missing(page(tmp_path, text)) == []
    inline = "# T\n\n`python -m torch_neuronx.plan train --tp 4` planned 1.49 s per step.\n"
    assert missing(page(tmp_path, inline, "inline.md")) == []


def test_a_command_in_another_section_or_too_far_away_does_not(tmp_path):
    other = "# T\n\n```bash\npython benchmarks/x.py\n```\n\n## Other\n\nThe step took 12.5 ms.\n"
    assert missing(page(tmp_path, other)) == [9]
    far = "# T\n\n`python benchmarks/x.py`\n" + "filler\n" * (doc_figures.WINDOW + 2) + "It took 3 s.\n"
    assert missing(page(tmp_path, far, "far.md")) == [4 + doc_figures.WINDOW + 2]


def test_a_command_above_a_table_covers_every_row(tmp_path):
    rows = "".join(f"| case {i} | {i}.5 ms |\n" for i in range(doc_figures.WINDOW + 5))
    text = "# T\n\n`python benchmarks/x.py`\n\n| case | time |\n|---|---|\n" + rows
    assert missing(page(tmp_path, text)) == []


def test_quoted_facts_with_a_source_settings_and_code_are_not_measurements(tmp_path):
    text = ("# T\n\nHBM per chip is 96 GiB ([hardware-sources.md](hardware-sources.md) C1).\n\n"
            "Regions from 1 MiB up (default 1 MiB) are shape-only; `--ranks 64` and `x86`, 2 x CP, Qwen3-8B.\n\n"
            "```\nstep 283.6 us\n```\n")
    assert missing(page(tmp_path, text)) == [5]   # "from 1 MiB up": a setting stated without "default"
    assert doc_figures.figures_without_command(page(tmp_path, text))[1] == 1


def test_broken_links_name_the_page_the_line_and_the_target(tmp_path):
    page(tmp_path, "# Other\n\n## A heading\n", "other.md")
    text = ("[ok](other.md) [anchor](other.md#a-heading) [bad anchor](other.md#nope) [gone](missing.md) "
            "[web](https://example.com) `[code](not-a-link.md)`\n")
    broken = doc_figures.broken_links([page(tmp_path, text)])
    assert len(broken) == 2
    assert broken[0].endswith(":1: other.md#nope (no such heading)") and broken[1].endswith(":1: missing.md")
