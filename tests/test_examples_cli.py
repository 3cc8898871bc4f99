"""The examples' command lines: ``--help`` shows every default, and long loops show progress."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from minitorch_amp.utils.progress import progress

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = [
    "simple_net.py",
    "digits_mlp.py",
    "digits_cnn.py",
    "distributed_simple_net.py",
    "plot_amp.py",
    "gpt.py",
]


@pytest.mark.parametrize("script", EXAMPLES)
def test_help_shows_the_default_of_every_option(script):
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    # argparse's help: an option, its help text, and "(default: ...)" before the next option
    text = out.stdout.split("options:", 1)[1]
    options = re.split(r"\n  (?=-)", text)[1:]
    assert options, out.stdout
    for option in options:
        if option.startswith("-h, --help"):
            continue
        assert "(default: " in option, option


def test_progress_draws_a_bar_when_asked_and_returns_the_items():
    pytest.importorskip("tqdm")
    stream = io.StringIO()
    assert list(progress(range(3), desc="steps", disable=False, file=stream)) == [0, 1, 2]
    assert "steps:" in stream.getvalue() and "0/3" in stream.getvalue()  # then wiped: leave=False


def test_progress_is_silent_when_stderr_is_not_a_terminal(capsys):
    assert list(progress(range(3), desc="steps")) == [0, 1, 2]
    assert capsys.readouterr() == ("", "")


def test_compare_with_float8_adds_the_bf16_and_fp8_rows():
    # docs/examples.md: `simple_net.py --compare --dtype float8` adds the bf16 and FP8 rows
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "simple_net.py"), "--compare"]
        + ["--dtype", "float8", "--epochs", "1", "--batches", "2", "--input-size", "64"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    modes = [line.split("  ")[0].strip() for line in out.stdout.splitlines()]
    for mode in ("fp32", "O1", "O2", "O1 bf16", "O2 bf16", "O1 fp8", "O2 fp8"):
        assert mode in modes, out.stdout


def test_compare_with_graph_replays_every_dtype_after_its_eager_rows():
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import simple_net
    finally:
        sys.path.remove(str(ROOT / "examples"))
    names = [
        f"{mode}{ {'float16': '', 'bfloat16': ' bf16', 'float8': ' fp8'}[dtype] }"
        + (" graph" if graphed else "")
        for mode, graphed, dtype in simple_net.compared_runs(graph=True, float8=True)
    ]
    assert names == [
        "fp32", "O1", "O2", "O1 graph", "O2 graph", "O1 bf16", "O2 bf16", "O1 bf16 graph",
        "O2 bf16 graph", "O1 fp8", "O2 fp8", "O1 fp8 graph", "O2 fp8 graph",
    ]  # fmt: skip
    assert simple_net.compared_runs() == [
        ("fp32", False, "float16"), ("O1", False, "float16"), ("O2", False, "float16"),
    ]  # fmt: skip
