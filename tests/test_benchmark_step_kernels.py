"""benchmarks/step_kernels.py: says why it measures nothing without a GPU (exit 0), builds
each mode's step as examples/simple_net.py trains it, and prints its kernel table from the
profiler's rows. The profile itself needs a GPU (the GPU check's runs)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from minitorch_amp.backend import device

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "step_kernels.py"


@pytest.fixture(scope="module")
def step_kernels():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import step_kernels
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return step_kernels


@pytest.mark.skipif(device.cupy is not None, reason="a GPU is here: the benchmark would run")
def test_without_a_gpu_it_says_so_and_exits_zero():
    out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("step_kernels.py: nothing to measure here")


@pytest.mark.parametrize("mode", ["fp32", "O1", "O2"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float8"])
def test_every_mode_and_dtype_builds_a_step_that_trains(step_kernels, mode, dtype):
    step = step_kernels.make_step(mode, dtype, width=16, batch=4)
    losses = [float(step().numpy()) for _ in range(3)]
    assert all(math.isfinite(loss) for loss in losses)


def test_the_table_ranks_by_gpu_time_and_sums_the_rest(step_kernels, capsys):
    table = {"gemm": [3.0, 60.0], "cast": [2.0, 30.0], "fill": [1.0, 6.0], "copy": [1.0, 4.0]}
    step_kernels.print_table("O2 float8", table, top=2)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "O2 float8: 7 GPU activities, 100.0 GPU µs per step"
    assert lines[4:] == [
        "| `gemm` | 3 | 60.0 | 60.0 |",
        "| `cast` | 2 | 30.0 | 30.0 |",
        "| 2 others | | 10.0 | 10.0 |",
    ]


class Event:
    """A profiler event as ``tabulate`` reads it."""

    def __init__(self, name, device, us):
        self.name, self.device_type = name, type("Kind", (), {"name": device})
        self.device_time = self.cpu_time_total = us


def test_the_profile_splits_into_gpu_activities_and_the_hosts_cuda_calls(step_kernels):
    events = [
        Event("gemm_sm90<...>", "CUDA", 40.0),
        Event("gemm_sm90<...>", "CUDA", 44.0),
        Event("cuLaunchKernel", "CPU", 5.0),
        Event("cuLaunchKernel", "CPU", 7.0),
        Event("cudaStreamSynchronize", "CPU", 300.0),
        Event("aten::empty", "CPU", 2.0),  # PyTorch's own operator: not a CUDA call
    ]
    kernels, api = step_kernels.tabulate(events, steps=2)
    assert kernels == {"gemm_sm90<...>": [1.0, 42.0]}
    assert api == {"cuLaunchKernel": [1.0, 6.0], "cudaStreamSynchronize": [0.5, 150.0]}


def test_the_api_table_marks_the_calls_that_wait_for_the_gpu(step_kernels, capsys):
    api = {"cuLaunchKernel": [21.0, 120.0], "cudaMalloc": [1.0, 80.0], "cuMemFree_v2": [1.0, 1.0]}
    step_kernels.print_api("O1 float16", api, top=2)
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "O1 float16: CUDA API calls, 201.0 host µs per step"
    assert lines[4:] == [
        "| `cuLaunchKernel` | 21.00 | 120.0 |  |",
        "| `cudaMalloc` | 1.00 | 80.0 | yes |",
        "| 1 others (waiting: cuMemFree_v2) | | 1.0 | |",
    ]
    step_kernels.print_api("O2 float16", {}, top=2)
    assert "none recorded" in capsys.readouterr().out
