"""Docs that are generated stay generated, and the style checks pass."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_op_table_doc_is_up_to_date():
    out = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "gen_ops.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff comes with the test extra")
def test_ruff_check_and_format_are_clean():
    for args in (["check", "--output-format", "concise"], ["format", "--check"]):
        out = subprocess.run(
            ["ruff", *args, "minitorch_amp", "tests", "examples", "benchmarks", "docs"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert out.returncode == 0, out.stdout + out.stderr


def test_readme_has_exactly_the_two_setup_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    commands = [line for line in readme.splitlines() if line.startswith("python -m pip install")]
    assert len(commands) == 2, commands
    test_command = next(c for c in commands if "pytest" in c)
    assert test_command in (ROOT / ".ci" / "run").read_text()
    assert any("examples/simple_net.py" in c for c in commands)


@pytest.mark.skipif(shutil.which("mkdocs") is None, reason="mkdocs comes with the test extra")
def test_the_docs_site_builds_strictly(tmp_path):
    out = subprocess.run(
        ["mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "site" / "index.html").exists()


def _python_blocks():
    # ```python blocks are run; code for other frameworks is shown in ```py blocks, not run.
    import re

    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for i, block in enumerate(re.findall(r"```python\n(.*?)```", path.read_text(), re.S)):
            yield pytest.param(block, id=f"{path.name}-{i}")


@pytest.mark.parametrize("code", list(_python_blocks()))
def test_every_python_snippet_in_the_docs_runs(code):
    exec(compile(code, "<doc snippet>", "exec"), {"__name__": "__doc_snippet__"})
