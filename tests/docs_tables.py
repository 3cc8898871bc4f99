"""Read the numbers a docs page shows after a command, so a test can compare them with a run.

A page shows a command's output either as a Markdown table or as a ```text block, after a
paragraph that names the command in backquotes. The tests that run the command read the
page's copy with these helpers instead of keeping their own, so page and test cannot drift:
a changed number on the page, or in what the command prints, fails the test.
"""

from __future__ import annotations

from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def section_after(page: str, marker: str) -> list[str]:
    """The lines of ``docs/<page>`` from the first line that starts with ``marker``."""
    lines = (DOCS / page).read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith(marker):
            return lines[i:]
    raise AssertionError(
        f"docs/{page} has no line starting with {marker!r}; update the test with the page"
    )


def table_after(page: str, marker: str) -> list[dict[str, str]]:
    """The first Markdown table after ``marker``: one dict per row, keyed by the header."""
    rows = []
    for line in section_after(page, marker):
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break
    if len(rows) < 3:
        raise AssertionError(f"docs/{page} has no table after {marker!r}")
    header, _separator, *body = rows
    return [dict(zip(header, row, strict=True)) for row in body]


def text_block_after(page: str, marker: str) -> list[str]:
    """The lines of the first ```text block after ``marker``."""
    lines = section_after(page, marker)
    start = lines.index("```text") + 1
    return lines[start : lines.index("```", start)]


def columns(rows: list[dict[str, str]], *names: str) -> dict[str, tuple[str, ...]]:
    """``{first cell: (the named cells)}`` for each row: the columns a test compares."""
    return {next(iter(row.values())): tuple(row[name] for name in names) for row in rows}
