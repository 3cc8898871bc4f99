"""benchmarks/gpt_parts.py: a row per part of the GPT's encoder layer, ours against PyTorch's."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpt_parts.py"


def run(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(SCRIPT), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def test_each_part_asked_for_gets_a_row_with_a_ratio():
    pytest.importorskip("torch")
    done = run("--parts", "gelu", "layer_norm", "encoder layer", "--batch", "1", "--steps", "2")
    assert done.returncode == 0, done.stderr
    assert "forward + backward, median of 2 calls each" in done.stdout
    rows = re.findall(r"^\| ([\w -]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", done.stdout, re.M)
    assert [row[0] for row in rows] == ["gelu", "layer_norm", "encoder layer"]
    for _, ours, theirs, ratio in rows:
        assert float(ours) > 0 and float(theirs) > 0 and float(ratio) > 0


def test_bad_counts_are_refused():
    done = run("--steps", "0")
    assert done.returncode == 2 and "--batch, --steps and --block must be at least 1" in done.stderr
