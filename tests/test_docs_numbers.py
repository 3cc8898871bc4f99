"""The numbers the docs show after a command are what that command prints today.

Each command runs once per session (a module fixture) and every page that shows its output is
compared with the run, cell by cell as printed: the deterministic columns (losses,
accuracies, bytes) exactly; the timings are measurements of one machine and moment, so the
test checks only that the page names the command and the device beside them.

Determinism: the losses and peak memory below are the same with 1 or 2 OpenBLAS threads and
with OpenBLAS's SkylakeX, Haswell and Prescott kernels (OPENBLAS_CORETYPE), so they are
compared exactly. The run pins one BLAS thread only for speed (OpenBLAS's threads made these
small GEMMs several times slower on a busy two-core machine).

Other tables (docs/examples.md's digits CNN) are checked where their run already happens:
tests/test_digits_cnn.py.
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import pytest
from docs_tables import columns, section_after, table_after
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

import simple_net  # noqa: E402

COMPARE = "`python examples/simple_net.py --compare`"
# The pages that show its table: the line that names the command, and the device it names.
COMPARE_PAGES = ("amp.md", "benchmarks.md")


@pytest.fixture(scope="module")
def compare_rows() -> dict[str, tuple[str, str]]:
    """``python examples/simple_net.py --compare`` on the CPU: {mode: (final loss, peak MiB)}."""
    out = io.StringIO()
    with threadpool_limits(limits=1, user_api="blas"), contextlib.redirect_stdout(out):
        simple_net.main(["--compare", "--device", "cpu"])
    lines = out.getvalue().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("mode"))
    assert lines[header].split()[-4:] == ["final", "loss", "peak", "MiB"], lines[header]
    rows = {}
    for line in lines[header + 1 :]:
        *mode, _seconds, _speed_up, loss, peak = line.split()
        rows[" ".join(mode)] = (loss, peak)
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("page", COMPARE_PAGES)
def test_the_compare_table_shows_the_losses_and_memory_the_command_prints(compare_rows, page):
    shown = columns(table_after(page, COMPARE), "final loss", "peak MiB")
    assert shown == compare_rows, (
        f"docs/{page}'s {COMPARE} table is stale: the command printed {compare_rows}; "
        "copy the printed row into the page (and re-read the prose around it)"
    )


@pytest.mark.parametrize("page", COMPARE_PAGES)
def test_the_compare_tables_timings_name_their_command_and_device(page):
    paragraph = []
    for line in section_after(page, COMPARE):
        if line.startswith("|"):
            break
        paragraph.append(line)
    said = " ".join(paragraph)
    for words in ("2-core", "no GPU", "threads", "load average"):
        assert words in said, f"docs/{page} should say {words!r} beside the timed table: {said}"


def test_amp_md_says_how_close_o1_comes_to_fp32_as_its_table_shows():
    # The lesson's sentence follows the table: the digits it claims are the digits shown.
    rows = columns(table_after("amp.md", COMPARE), "final loss")
    fp32, o1 = rows["fp32"][0], rows["O1"][0]
    first_difference = next(i for i, (a, b) in enumerate(zip(fp32, o1, strict=True)) if a != b)
    digit = first_difference  # counting significant digits: "1.2496" and "1.2497" differ in the 5th
    ordinal = {3: "third", 4: "fourth", 5: "fifth", 6: "sixth", 7: "seventh"}[digit]
    lesson = " ".join(section_after("amp.md", '"final loss" is the mean')[:2])
    assert f"differs from fp32 in the {ordinal} significant digit" in lesson, (fp32, o1, lesson)
