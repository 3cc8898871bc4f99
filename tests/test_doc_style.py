"""The docs read well on a laptop: code blocks fit in 88 columns (no sideways scrolling at
1280 px in the MkDocs theme), as ruff formats Python at 88 by default."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
WIDTH = 88


def long_code_lines(text: str) -> list[tuple[int, int]]:
    """``(line number, length)`` of every line inside a fenced block longer than WIDTH."""
    found, inside = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(r"^\s*```", line):
            inside = not inside
        elif inside and len(line) > WIDTH:
            found.append((number, len(line)))
    return found


def test_the_check_sees_a_long_line_only_inside_a_block():
    text = "x" * 100 + "\n```python\n" + "y" * 89 + "\n" + "z" * 88 + "\n```\n" + "w" * 100
    assert long_code_lines(text) == [(3, 89)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_code_blocks_fit_in_88_columns(page):
    assert long_code_lines(page.read_text()) == [], f"{page.name}: lines over {WIDTH} columns"
