"""The FP8 GEMM against cuBLASLt's (``torch._scaled_mm``), same operands, same process.

    python benchmarks/fp8_gemm.py              # needs CuPy, a Hopper GPU, and PyTorch with CUDA
    python benchmarks/fp8_gemm.py --repeat 5   # fewer timed replays

Each row: ``C = (A @ B) * scale_a * scale_b`` with A [M, K] E4M3 row-major, B given K-major
(B^T [N, K] row-major: what our kernel reads, and the column-major B ``torch._scaled_mm``
wants), float32 accumulation and a bfloat16 result, at 4096^3 and 8192^3. Kernel time, not
host time: ours (``backend.fp8_gemm.fp8_gemm_nt``, ``cuda/gemm_fp8_sm90.cu``) as a CUDA
graph of 20 launches captured with CuPy, cuBLASLt as the same graph of ``torch._scaled_mm``
captured with PyTorch, each after at least 1 s of sustained replays (``timing.warm_up``).
The operands are random normals cast to E4M3 by ``fp8_cast.cu`` (scale 1), and both results
are checked against each other before any timing.

Target on an H100 (issue 28): ours >= 0.8x ``torch._scaled_mm`` at both sizes.
On a machine without such a GPU it says so and exits 0 (nothing to measure).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gemm_rows import REPLAYED, graph_timed
from timing import GPU_WARMUP_S, warm_up

from minitorch_amp.backend import device, fp8_kernels, gemm_sm90
from minitorch_amp.backend.fp8_gemm import fp8_gemm_nt

SIZES = [(4096, 4096, 4096), (8192, 8192, 8192)]
TARGET = 0.8


def why_not_runnable() -> str | None:
    """None when this machine can run the comparison, else what is missing."""
    if device.cupy is None:
        return "no CuPy or no CUDA device"
    if not gemm_sm90.device_is_hopper():
        return (
            "the FP8 GEMM is built for sm_90a and this GPU is not Hopper (compute capability 9.0)"
        )
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed (torch._scaled_mm is the yardstick)"
    if not torch.cuda.is_available() or not hasattr(torch, "_scaled_mm"):
        return "this PyTorch has no CUDA or no torch._scaled_mm"
    return None


def operands(m: int, n: int, k: int):
    """A [M, K] and B^T [N, K] as E4M3 bytes (CuPy uint8), and the two scales (1.0)."""
    cp = device.cupy
    one = cp.ones(1, dtype=cp.float32)
    a = fp8_kernels.cast_fp8_with_amax(cp.random.standard_normal((m, k), dtype=cp.float32), one, 0)[
        0
    ]
    b_t = fp8_kernels.cast_fp8_with_amax(
        cp.random.standard_normal((n, k), dtype=cp.float32), one, 0
    )[0]
    return a, b_t, one, one.copy()


def scaled_mm_timed(torch, a, b_t, scale_a, scale_b, repeat: int) -> float:
    """Median seconds per ``torch._scaled_mm`` as a graph of ``REPLAYED`` calls."""
    ta = torch.from_dlpack(a).view(torch.float8_e4m3fn)
    tb = torch.from_dlpack(b_t).view(torch.float8_e4m3fn).t()  # [K, N], column-major
    sa, sb = torch.from_dlpack(scale_a).reshape(()), torch.from_dlpack(scale_b).reshape(())

    def call():
        return torch._scaled_mm(ta, tb, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        call()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(REPLAYED):
            call()
    warm_up(graph.replay, torch.cuda.synchronize, GPU_WARMUP_S)
    times = []
    for _ in range(repeat):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1e3 / REPLAYED)
    return statistics.median(times)


E4M3 = 0  # the operands' format code: CuPy has no float8 dtype, they are uint8 storage


def ours_gemm(a, b_t, scale_a, scale_b):
    """Our FP8 GEMM on E4M3 bytes (uint8 storage: the format code says what they hold)."""
    return fp8_gemm_nt(a, b_t, scale_a, scale_b, "bfloat16", E4M3, E4M3)


def check_agreement(torch, a, b_t, scale_a, scale_b) -> float:
    """The largest difference between the two results, relative to the largest magnitude."""
    ours = ours_gemm(a, b_t, scale_a, scale_b)
    ta = torch.from_dlpack(a).view(torch.float8_e4m3fn)
    tb = torch.from_dlpack(b_t).view(torch.float8_e4m3fn).t()
    one = torch.from_dlpack(scale_a).reshape(())
    theirs = torch._scaled_mm(ta, tb, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    ours_t = torch.from_dlpack(ours.view(np.uint16)).view(torch.bfloat16).float()
    scale = theirs.float().abs().max().item()
    return (ours_t - theirs.float()).abs().max().item() / scale


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10, help="timed graph replays per run")
    args = parser.parse_args(argv)
    reason = why_not_runnable()
    if reason is not None:
        print(f"fp8_gemm.py: nothing to measure here: {reason}. Run it on an H100 or H200.")
        return 0
    import torch

    print(f"FP8 GEMM (E4M3 x E4M3 -> bf16) on {torch.cuda.get_device_name()}, kernel time:")
    print("| shape | ours TFLOP/s | torch._scaled_mm TFLOP/s | ratio | max rel. diff |")
    print("|---|---|---|---|---|")
    worst = float("inf")
    for m, n, k in SIZES:
        a, b_t, sa, sb = operands(m, n, k)
        diff = check_agreement(torch, a, b_t, sa, sb)

        def ours_call(a=a, b_t=b_t, sa=sa, sb=sb):
            return ours_gemm(a, b_t, sa, sb)

        ours = graph_timed(ours_call, args.repeat)
        theirs = scaled_mm_timed(torch, a, b_t, sa, sb, args.repeat)
        flops = 2.0 * m * n * k
        ratio = theirs / ours
        worst = min(worst, ratio)
        print(
            f"| {m}x{n}x{k} | {flops / ours / 1e12:.0f} | {flops / theirs / 1e12:.0f} | "
            f"{ratio:.2f}x | {diff:.1e} |"
        )
    verdict = "meets" if worst >= TARGET else "misses"
    print(f"worst ratio {worst:.2f}x: {verdict} the target of {TARGET}x torch._scaled_mm")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
