"""benchmarks/fp8_gemm.py says why it measures nothing on a machine without a Hopper GPU, and
exits 0, so the GPU check and a CPU run of every benchmark stay green."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from minitorch_amp.backend import device

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "fp8_gemm.py"


@pytest.mark.skipif(device.cupy is not None, reason="a GPU is here: the benchmark would run")
def test_without_a_gpu_it_says_so_and_exits_zero():
    out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("fp8_gemm.py: nothing to measure here: no CuPy")
    assert "H100" in out.stdout


def test_it_knows_the_issue_sizes_and_target():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import fp8_gemm
    finally:
        sys.path.remove(str(SCRIPT.parent))
    assert fp8_gemm.SIZES == [(4096, 4096, 4096), (8192, 8192, 8192)] and fp8_gemm.TARGET == 0.8
