"""Every test the docs cite as evidence exists: a claim whose test was renamed away has no
test any more (reliability.md cited two such names before this check)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CITED = re.compile(r"tests/([\w/]+\.py)::(\w+)")


def missing_tests(text: str) -> list[str]:
    """The ``tests/<file>.py::<name>`` citations in ``text`` with no such file or ``def``."""
    missing = []
    for match in CITED.finditer(text):
        path = ROOT / "tests" / match.group(1)
        if not path.is_file() or f"def {match.group(2)}(" not in path.read_text():
            missing.append(match.group(0))
    return missing


def test_the_check_sees_a_renamed_test_and_a_missing_file():
    text = (
        "`tests/test_docs_test_names.py::test_the_check_sees_a_renamed_test_and_a_missing_file`"
        " `tests/test_docs_test_names.py::test_renamed` `tests/no_such_file.py::test_x`"
    )
    assert missing_tests(text) == [
        "tests/test_docs_test_names.py::test_renamed",
        "tests/no_such_file.py::test_x",
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_test_a_page_cites_exists(page):
    assert missing_tests(page.read_text()) == []
