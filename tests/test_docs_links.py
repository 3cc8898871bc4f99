"""A broken link or anchor between the docs pages fails the strict site build.

MkDocs reports a link to a missing anchor only at INFO unless ``mkdocs.yml`` configures
``validation``; these tests build a copy of the real site with one broken link added and
check that ``mkdocs build --strict`` refuses it (the unbroken site is built by
tests/test_docs.py::test_the_docs_site_builds_strictly).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import needs
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _strict_build_of_a_copy_with(tmp_path: Path, link: str) -> subprocess.CompletedProcess:
    mkdocs = needs.program("mkdocs", "it comes with the test extra")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    index = tmp_path / "docs" / "index.md"
    index.write_text(index.read_text() + f"\nSee [this section]({link}).\n")
    return subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("link", "complaint"),
    [
        ("amp.md#6-what-it-costs-on-a-cpu", "does not contain an anchor"),
        ("#no-such-heading-on-this-page", "no such anchor on this page"),
        ("no-such-page.md", "not found among documentation files"),
    ],
)
def test_a_strict_build_fails_on_a_broken_link_or_anchor(tmp_path, link, complaint):
    out = _strict_build_of_a_copy_with(tmp_path, link)
    assert out.returncode != 0, out.stdout + out.stderr
    assert complaint in out.stdout + out.stderr


def test_a_strict_build_of_the_same_copy_with_a_working_anchor_passes(tmp_path):
    out = _strict_build_of_a_copy_with(
        tmp_path, "amp.md#7-what-it-costs-on-a-cpu-and-what-the-master-weights-learn"
    )
    assert out.returncode == 0, out.stdout + out.stderr
