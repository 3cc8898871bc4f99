"""benchmarks/launch_cost.py: says why it measures nothing without a GPU (exit 0, so a CPU run
of every benchmark stays green), and its rows report a failure or a missing path instead of
stopping the table. The timings themselves need a GPU (the GPU check runs them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from minitorch_amp.backend import device

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "launch_cost.py"


@pytest.fixture(scope="module")
def launch_cost():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import launch_cost
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return launch_cost


@pytest.mark.skipif(device.cupy is not None, reason="a GPU is here: the benchmark would run")
def test_without_a_gpu_it_says_so_and_exits_zero():
    out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("launch_cost.py: nothing to measure here: no CuPy")


def test_a_failing_or_missing_path_is_a_row_that_says_so(launch_cost, monkeypatch):
    monkeypatch.setattr(launch_cost, "ROUNDS", 3)
    monkeypatch.setattr(launch_cost, "WARMUP_S", 0.0)
    synced = []

    def broken():
        raise RuntimeError("cuLaunchKernel failed: CUresult 1")

    rows = launch_cost.measure(
        [("works", lambda: None), ("missing", None), ("broken", broken)], lambda: synced.append(1)
    )
    assert rows[0][0] == "works" and float(rows[0][1]) >= 0
    assert rows[1] == ("missing", "not available here")
    assert rows[2] == ("broken", "failed: RuntimeError: cuLaunchKernel failed: CUresult 1")
    assert synced  # each round starts and ends on an idle device


def test_parameters_are_packed_as_pointers_to_the_values(launch_cost):
    import ctypes

    values = (ctypes.c_void_p(1234), ctypes.c_int64(-5))
    params = launch_cost._pack(*values)
    assert [params[i] for i in range(2)] == [ctypes.addressof(v) for v in values]
    assert ctypes.c_int64.from_address(params[1]).value == -5
