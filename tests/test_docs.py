"""Docs that are generated stay generated, every snippet prints what its page shows, and the
style checks pass."""

from __future__ import annotations

import contextlib
import difflib
import io
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import needs
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


def test_ruff_check_and_format_are_clean():
    ruff = needs.program("ruff", "it comes with the test extra")
    for args in (["check", "--output-format", "concise"], ["format", "--check"]):
        out = subprocess.run(
            [ruff, *args, "minitorch_amp", "tests", "examples", "benchmarks", "docs", "tools"],
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


def test_the_docs_site_builds_strictly(tmp_path):
    mkdocs = needs.program("mkdocs", "it comes with the test extra")
    out = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "site" / "index.html").exists()


# A ```python block followed (after blank lines only) by a ```text block: the text block is
# what the snippet prints, exactly. A snippet that prints needs one (output written as a
# comment beside the print is not checked, so it is not how a page shows output). An HTML
# comment right before the text block may loosen the comparison of floats (numbers written
# with a '.' or an exponent; integers stay exact):
#   <!-- floats: N significant digits -->  within one unit of the N-th significant digit
#   <!-- floats: within P% -->             within P percent of the shown value
# Use it only where the printed value varies with the machine, and say by how much (measured:
# docs/index.md's training losses at steps 150 and 200 move by up to 30% between OpenBLAS's
# Prescott, Sandybridge, Haswell and SkylakeX kernels, OPENBLAS_CORETYPE; every other shown
# output is identical under all four).
SNIPPET = re.compile(
    r"```python\n(?P<code>.*?)```\n"
    r"(?:\s*<!-- floats: "
    r"(?:(?P<digits>\d+) significant digits|within (?P<percent>\d+)%)[^>]*-->\n)?"
    r"(?:\s*```text\n(?P<shown>.*?)```)?",
    re.S,
)
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?inf|nan")


def _python_blocks():
    # ```python blocks are run; code for other frameworks is shown in ```py blocks, not run.
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for i, m in enumerate(SNIPPET.finditer(path.read_text())):
            loose = None
            if m["digits"]:
                loose = ("digits", int(m["digits"]))
            elif m["percent"]:
                loose = ("percent", int(m["percent"]))
            yield pytest.param(m["code"], m["shown"], loose, id=f"{path.name}-{i}")


def _close(got: float, want: float, loose) -> bool:
    kind, n = loose
    if kind == "percent":
        return abs(got - want) <= n / 100 * abs(want)
    unit = 10.0 ** (math.floor(math.log10(abs(want))) - n + 1) if want else 0.0
    return abs(got - want) <= unit


def assert_same_output(printed: str, shown: str, loose=None) -> None:
    """``printed`` is what the page shows: exactly, or with floats ``loose``ly equal."""
    if loose is None:
        assert printed == shown, _difference(printed, shown)
        return
    assert NUMBER.split(printed) == NUMBER.split(shown), _difference(printed, shown)
    for got, want in zip(NUMBER.findall(printed), NUMBER.findall(shown), strict=True):
        is_float = any(c in want for c in ".eE") or want.lstrip("+-") in ("inf", "nan")
        same = got == want or (is_float and _close(float(got), float(want), loose))
        assert same, f"printed {got}, the page shows {want} ({loose})\n" + (
            _difference(printed, shown)
        )


def _difference(printed: str, shown: str) -> str:
    diff = difflib.unified_diff(
        shown.splitlines(), printed.splitlines(), "shown on the page", "printed", lineterm=""
    )
    return "\n".join(diff)


@pytest.mark.parametrize("code, shown, loose", list(_python_blocks()))
def test_every_python_snippet_in_the_docs_runs_and_prints_what_the_page_shows(code, shown, loose):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<doc snippet>", "exec"), {"__name__": "__doc_snippet__"})
    if shown is None:  # a page that shows no output must not hide some
        assert out.getvalue() == "", "the snippet prints; show it in a ```text block after it"
    else:
        assert_same_output(out.getvalue(), shown, loose)


@pytest.mark.parametrize(
    "printed, shown, loose, same",
    [
        ("loss 3.65e-04\n", "loss 3.62e-04\n", None, False),
        ("loss 3.65e-04\n", "loss 3.62e-04\n", ("digits", 3), False),  # 3 units of the 3rd
        ("loss 3.65e-04\n", "loss 3.62e-04\n", ("digits", 2), True),
        ("loss 3.62e-04\n", "loss 3.62e-04\n", None, True),
        ("loss 4.9e-07\n", "loss 3.85e-07\n", ("percent", 30), True),
        ("loss 5.1e-07\n", "loss 3.85e-07\n", ("percent", 30), False),
        ("step 50 loss 1.0\n", "step 51 loss 1.0\n", ("digits", 1), False),  # integers: exact
        ("loss 1.0 scale 2\n", "loss 1.0  scale 2\n", ("digits", 3), False),  # text: exact
        ("loss 1.0\n", "loss 1.0\nmore\n", None, False),
    ],
)
def test_output_comparison(printed, shown, loose, same):
    if same:
        assert_same_output(printed, shown, loose)
    else:
        with pytest.raises(AssertionError):
            assert_same_output(printed, shown, loose)
