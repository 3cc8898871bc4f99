"""benchmarks/kernels.py --fp8: the FP8 GEMM's table (benchmarks/fp8_gemm.py) after the kernel
table, or one line saying why it was skipped.

The GPU check runs it so (docs/benchmarks.md, "The GPU check"). The kernel table comes first:
a stage stopped by its timeout while the FP8 GEMM is timed keeps the table in its log. The
timings need a Hopper GPU; here the GPU, the rows and fp8_gemm.py's own run are stand-ins.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from minitorch_amp.backend import device

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
NOT_HOPPER = "the FP8 GEMM is built for sm_90a and this GPU is not Hopper (compute capability 9.0)"


@pytest.fixture
def bench(monkeypatch):
    """benchmarks/kernels.py loaded as a module, on a fake GPU with one row per benchmark;
    ``bench.fp8_runs`` records the argument lists fp8_gemm.main was called with."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location("bench_kernels", BENCHMARKS / "kernels.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    properties = {"name": b"Fake H100"}
    fake = SimpleNamespace(
        cuda=SimpleNamespace(runtime=SimpleNamespace(getDeviceProperties=lambda i: properties))
    )
    monkeypatch.setattr(module.device, "cupy", fake)
    monkeypatch.setattr(module, "bench_gemm", lambda repeat: [("GEMM 4096^3", "TFLOP/s", 6, 7)])
    monkeypatch.setattr(module, "bench_cast", lambda repeat: [("cast", "GB/s", 9, 10)])
    monkeypatch.setattr(module, "bench_adam", lambda repeat: [("Adam", "GB/s", 5, 10)])
    monkeypatch.setattr(module.gemm_rows, "cublas_timing", "")
    module.fp8_runs = []

    def fp8_main(argv):
        module.fp8_runs.append(argv)
        print("FP8 GEMM (E4M3 x E4M3 -> bf16) on Fake H100, kernel time:")
        print("worst ratio 0.90x: meets the target of 0.8x torch._scaled_mm")
        return 0

    monkeypatch.setattr(module.fp8_gemm, "main", fp8_main)
    monkeypatch.setattr(module.fp8_gemm, "why_not_runnable", lambda: None)
    return module


def run(bench, monkeypatch, capsys, *args: str) -> list[str]:
    monkeypatch.setattr(sys, "argv", ["kernels.py", *args])
    bench.main()
    return capsys.readouterr().out.splitlines()


def test_fp8_prints_the_fp8_gemm_table_after_the_kernel_table(bench, monkeypatch, capsys):
    lines = run(bench, monkeypatch, capsys, "--fp8", "--repeat", "3")
    assert lines[0].startswith("raw kernels on Fake H100, median of 3 runs")
    assert [line.split()[0] for line in lines[2:5]] == ["GEMM", "cast", "Adam"]
    assert lines[5:] == [
        "FP8 GEMM (E4M3 x E4M3 -> bf16) on Fake H100, kernel time:",
        "worst ratio 0.90x: meets the target of 0.8x torch._scaled_mm",
    ]
    assert bench.fp8_runs == [["--repeat", "3"]]  # one --repeat for every row


def test_fp8_on_a_gpu_that_cannot_run_it_says_why_in_one_line(bench, monkeypatch, capsys):
    monkeypatch.setattr(bench.fp8_gemm, "why_not_runnable", lambda: NOT_HOPPER)
    lines = run(bench, monkeypatch, capsys, "--fp8")
    assert lines[-1] == f"FP8 GEMM against torch._scaled_mm: skipped: {NOT_HOPPER}"
    assert lines[-2].startswith("Adam") and bench.fp8_runs == []


def test_without_fp8_the_kernel_table_is_all(bench, monkeypatch, capsys):
    lines = run(bench, monkeypatch, capsys)
    assert lines[-1].startswith("Adam") and bench.fp8_runs == []


@pytest.mark.skipif(device.cupy is not None, reason="a GPU is here: the benchmark would run")
def test_fp8_without_a_gpu_says_so_and_exits_zero():
    script = BENCHMARKS / "kernels.py"
    out = subprocess.run(
        [sys.executable, str(script), "--fp8"], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("benchmarks/kernels.py needs CuPy and a CUDA device")
    assert len(out.stdout.splitlines()) == 1  # that line, no FP8 line after it
