"""Every runnable example is where a newcomer looks for it: a row of docs/examples.md's table
and the README's layout."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.name for p in (ROOT / "examples").glob("*.py"))


def _readme_layout() -> str:
    readme = (ROOT / "README.md").read_text()
    return readme.split("## Layout", 1)[1].split("\n## ", 1)[0]


def test_there_are_examples_to_look_for():
    assert {"simple_net.py", "plot_amp.py", "plot_bf16.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_an_example_has_a_row_in_the_examples_page(script):
    rows = re.findall(r"^\| `([\w.]+)` \|", (ROOT / "docs" / "examples.md").read_text(), re.M)
    assert script in rows, f"docs/examples.md's table has no row for {script}"


@pytest.mark.parametrize("script", SCRIPTS)
def test_an_example_is_named_in_the_readme_layout(script):
    assert re.search(rf"\b{re.escape(script)}\b", _readme_layout()), (
        f"README.md's layout does not name examples/{script}"
    )
