"""docs/results.md, the one page of today's figures: every row links to a run in docs/benchmarks.md that exists,
and every figure it states has a date."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"
LINK = re.compile(r"\(benchmarks\.md#([a-z0-9-]+)\)")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    return {slug(line.lstrip("#")) for line in markdown.splitlines() if line.startswith("#")}


def rows(markdown: str) -> list[list[str]]:
    """The table's body rows as cells (the header and the rule line skipped)."""
    lines = [line for line in markdown.splitlines() if line.startswith("|")]
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]


def test_slug_follows_github() -> None:
    assert slug(" Local runtimes: the default on this CPU (issue 45, 2026-11-29)") == (
        "local-runtimes-the-default-on-this-cpu-issue-45-2026-11-29")
    assert slug("Identity: lip sync at video rate (issue 48)") == "identity-lip-sync-at-video-rate-issue-48"


def test_every_row_links_to_a_run_that_exists_and_every_figure_is_dated() -> None:
    known = anchors((DOCS / "benchmarks.md").read_text(encoding="utf-8"))
    table = rows((DOCS / "results.md").read_text(encoding="utf-8"))
    assert len(table) >= 10
    for cells in table:
        target, figure, date, run = cells[0], cells[2], cells[4], cells[5]
        links = LINK.findall(run)
        assert links, f"{target}: no link to its run in benchmarks.md"
        assert set(links) <= known, f"{target}: no heading for {set(links) - known} in benchmarks.md"
        measured = not figure.lower().startswith("no ")
        assert not measured or DATE.search(date), f"{target}: the figure {figure!r} has no date"


def test_the_readme_links_the_results_page() -> None:
    assert "docs/results.md" in (DOCS.parent / "README.md").read_text(encoding="utf-8")
