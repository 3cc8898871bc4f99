"""benchmarks/gelu.py prints its table and the erf accuracy line, with PyTorch and without it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
ROWS = ["erf", "erf, float64 (before)", "gelu", "gelu fwd+bwd", "gelu tanh"]


def run(block_torch: bool) -> str:
    """The benchmark's output on a tiny tensor; ``block_torch`` makes ``import torch`` fail."""
    block = "sys.modules['torch'] = None; " if block_torch else ""
    code = (
        f"import runpy, sys; {block}sys.path.insert(0, {str(BENCHMARKS)!r}); "
        "sys.argv = ['gelu.py', '--shape', '256', '--steps', '2']; "
        f"runpy.run_path({str(BENCHMARKS / 'gelu.py')!r}, run_name='__main__')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def table(text: str) -> dict[str, list[str]]:
    rows = [line.strip("|").split("|") for line in text.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in rows[1:]}


def test_without_torch_it_times_ours_and_leaves_the_torch_columns_empty():
    text = run(block_torch=True)
    rows = table(text)
    assert list(rows) == ROWS
    assert all(float(cells[0]) > 0 and cells[1:] == ["", ""] for cells in rows.values())
    ours = float(re.search(r"ours ([\d.]+) ULP", text).group(1))
    assert ours <= 1.0 and "torch" not in text.split("largest error")[1].split("(")[0]


def test_with_torch_each_row_has_a_ratio():
    pytest.importorskip("torch")
    rows = table(run(block_torch=False))
    for name, (ours, theirs, ratio) in rows.items():
        if name == "erf, float64 (before)":
            assert theirs == ratio == ""
        else:  # the columns are rounded to 0.01 ms: on this tiny tensor only the sign holds
            assert float(ours) >= 0 and float(theirs) >= 0 and float(ratio) > 0
