"""benchmarks/gelu.py prints its table and the erf accuracy line, with PyTorch and without it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
ROWS = ["erf", "erf, float64 (before)", "gelu", "gelu fwd+bwd", "gelu tanh"]


def run(block_torch: bool, *extra: str, ok: bool = True) -> subprocess.CompletedProcess:
    """The benchmark on a tiny tensor; ``block_torch`` makes ``import torch`` fail."""
    block = "sys.modules['torch'] = None; " if block_torch else ""
    argv = ["gelu.py", "--shape", "256", "--steps", "2", *extra]
    code = (
        f"import runpy, sys; {block}sys.path.insert(0, {str(BENCHMARKS)!r}); "
        f"sys.argv = {argv!r}; "
        f"runpy.run_path({str(BENCHMARKS / 'gelu.py')!r}, run_name='__main__')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert (out.returncode == 0) == ok, out.stderr
    return out


def table(text: str) -> dict[str, list[str]]:
    rows = [line.strip("|").split("|") for line in text.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in rows[1:]}


def test_without_torch_it_times_ours_and_leaves_the_torch_columns_empty():
    text = run(block_torch=True).stdout
    rows = table(text)
    assert list(rows) == ROWS
    assert all(float(cells[0]) > 0 and cells[1:] == ["", ""] for cells in rows.values())
    ours = float(re.search(r"ours ([\d.]+) ULP", text).group(1))
    assert ours <= 1.0 and "torch" not in text.split("largest error")[1].split("(")[0]


def test_with_torch_each_row_has_a_ratio():
    pytest.importorskip("torch")
    rows = table(run(block_torch=False).stdout)
    for name, (ours, theirs, ratio) in rows.items():
        if name == "erf, float64 (before)":
            assert theirs == ratio == ""
        else:  # the columns are rounded to 0.01 ms: on this tiny tensor only the sign holds
            assert float(ours) >= 0 and float(theirs) >= 0 and float(ratio) > 0


def test_std_scales_the_input_and_must_be_positive():
    text = run(True, "--std", "0.3").stdout
    assert "standard deviation 0.3," in text.splitlines()[0] and list(table(text)) == ROWS
    assert "--std must be positive, got 0.0" in run(True, "--std", "0", ok=False).stderr
