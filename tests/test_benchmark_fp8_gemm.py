"""benchmarks/fp8_gemm.py says why it measures nothing on a machine without a Hopper GPU, and
exits 0, so the GPU check and a CPU run of every benchmark stay green."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
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


def test_it_hands_our_gemm_uint8_storage_with_its_format_code():
    # the H200 run: CuPy holds FP8 as uint8, and a uint8 operand without a code is refused
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import fp8_gemm
    finally:
        sys.path.remove(str(SCRIPT.parent))
    from minitorch_amp.backend import fp8_kernels
    from minitorch_amp.backend.fp8_gemm import twin_gemm

    rng = np.random.default_rng(0)
    one = np.ones(1, np.float32)
    a = fp8_kernels.cast_fp8_with_amax(rng.standard_normal((32, 64), np.float32), one, 0)[0]
    b_t = fp8_kernels.cast_fp8_with_amax(rng.standard_normal((16, 64), np.float32), one, 0)[0]
    a, b_t = a.view(np.uint8), b_t.view(np.uint8)  # what the GPU hands over
    out = fp8_gemm.ours_gemm(a, b_t, one, one)
    want = twin_gemm(a, b_t.T, one, one, "bfloat16", 0, 0)
    assert out.shape == (32, 16) and np.array_equal(out.view(np.uint16), want.view(np.uint16))
