"""The GEMM rows of ``benchmarks/kernels.py``: our GEMM against cuBLAS, side by side.

Each row times, on the same operands in the same process, ``backend.gemm.gemm`` as it
dispatches (the Hopper kernel ``gemm_sm90.cu`` on compute capability 9.0), the same call with
``MINITORCH_AMP_GEMM_KERNEL=sm80`` (the ``mma.sync`` kernel ``gemm_fp16.cu``) and cuBLAS,
on fp16 inputs with fp32 accumulation and fp16 output.

Kernel time, not host time: a 512 x 4096 x 4096 product takes ~30 us on an H100, less than
a Python call that launches it, so CUDA events around one eager call time the host. Our
kernels are timed as a CUDA graph of ``REPLAYED`` launches (captured with CuPy), cuBLAS as
the same graph of ``torch.mm`` (captured with PyTorch, which shares the GPU; CuPy refuses to
capture cuBLAS). Without PyTorch, cuBLAS is ``cupy.matmul`` timed eagerly ``REPLAYED`` calls
at a time, and the row says so. The shapes
are the issue's three square-ish problems and the GEMMs of one SimpleNet training step at the
tutorial's sizes (width 4096, batch 512): three forward ``x @ W`` (NN), two input gradients
``dy @ W^T`` (NT; the first layer's input needs none) and three weight gradients
``x^T @ dy`` (TN). ``--sweep`` times every tile width and split of the Hopper kernel's shape
rule instead (``gemm_sm90.forced_plan``), which is how the rule's thresholds are chosen.
"""

from __future__ import annotations

import os
import statistics

from timing import GPU_WARMUP_S, warm_up

from minitorch_amp.backend import device, gemm_sm90
from minitorch_amp.backend.gemm import gemm

REPLAYED = 20  # launches per timed graph replay
cublas_timing = ""  # how the last rows() timed cuBLAS (printed under the table)

# (label, M, N, K, transpose_a, transpose_b, launches per SimpleNet step or 0)
SHAPES = [
    ("GEMM 512x4096x4096", 512, 4096, 4096, False, False, 0),
    ("GEMM 4096^3", 4096, 4096, 4096, False, False, 0),
    ("GEMM 8192^3", 8192, 8192, 8192, False, False, 0),
    ("SimpleNet fwd NN x3", 512, 4096, 4096, False, False, 3),
    ("SimpleNet dgrad NT x2", 512, 4096, 4096, False, True, 2),
    ("SimpleNet wgrad TN x3", 4096, 4096, 512, True, False, 3),
]


def operands(m, n, k, ta, tb, dtype="float16"):
    cp = device.cupy
    a = cp.random.standard_normal((k, m) if ta else (m, k), dtype=cp.float32).astype(dtype)
    b = cp.random.standard_normal((n, k) if tb else (k, n), dtype=cp.float32).astype(dtype)
    return a, b


def _ours(a, b, ta, tb, kernel):
    def run():
        previous = os.environ.get(gemm_sm90.KERNEL_ENV)
        os.environ[gemm_sm90.KERNEL_ENV] = kernel
        try:
            gemm(a, b, ta, tb)
        finally:
            if previous is None:
                del os.environ[gemm_sm90.KERNEL_ENV]
            else:
                os.environ[gemm_sm90.KERNEL_ENV] = previous

    return run


def _median_per_launch(replay, record, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        times.append(record(replay) / REPLAYED)
    return statistics.median(times)


def graph_timed(fn, repeat: int, warmup_s: float = GPU_WARMUP_S) -> float:
    """Median seconds per launch of ``fn`` (our kernels): ``REPLAYED`` calls captured once
    into a CUDA graph on a non-blocking stream, replayed after ``warmup_s`` of replays."""
    cp = device.cupy
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        fn()  # compiles, allocates outside the capture
        stream.synchronize()
        stream.begin_capture()
        for _ in range(REPLAYED):
            fn()
        graph = stream.end_capture()

        def replay():
            graph.launch(stream)

        warm_up(replay, stream.synchronize, warmup_s)

        def record(run):
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record(stream)
            run()
            stop.record(stream)
            stop.synchronize()
            return cp.cuda.get_elapsed_time(start, stop) / 1e3

        return _median_per_launch(replay, record, repeat)


def cublas_timed(a, b, repeat: int, warmup_s: float = GPU_WARMUP_S) -> tuple[float, str]:
    """Median seconds per cuBLAS product ``a @ b``, and how it was timed."""
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        cp = device.cupy

        def eager():
            for _ in range(REPLAYED):
                cp.matmul(a, b)

        def record(run):
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            run()
            stop.record()
            stop.synchronize()
            return cp.cuda.get_elapsed_time(start, stop) / 1e3

        warm_up(eager, cp.cuda.runtime.deviceSynchronize, warmup_s)
        return _median_per_launch(eager, record, repeat), "cupy.matmul, eager"
    ta, tb = torch.from_dlpack(a), torch.from_dlpack(b)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        torch.mm(ta, tb)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(REPLAYED):
            torch.mm(ta, tb)
    warm_up(graph.replay, torch.cuda.synchronize, warmup_s)

    def record(run):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) / 1e3

    return _median_per_launch(graph.replay, record, repeat), "torch.mm, graph replay"


def rows(repeat: int):
    """``(label, unit, ours, yardstick, extra)`` rows; ``extra`` is the sm80 kernel's TFLOP/s."""
    global cublas_timing
    out = []
    step = {"auto": 0.0, "sm80": 0.0, "cublas": 0.0, "flops": 0.0}
    for label, m, n, k, ta, tb, per_step in SHAPES:
        a, b = operands(m, n, k, ta, tb)
        op_a, op_b = (a.T if ta else a), (b.T if tb else b)
        flops = 2.0 * m * n * k
        cublas, cublas_timing = cublas_timed(op_a, op_b, repeat)
        seconds = {
            "auto": graph_timed(_ours(a, b, ta, tb, "auto"), repeat),
            "sm80": graph_timed(_ours(a, b, ta, tb, "sm80"), repeat),
            "cublas": cublas,
        }
        tflops = {key: flops / s / 1e12 for key, s in seconds.items()}
        out.append((label, "TFLOP/s", tflops["auto"], tflops["cublas"], tflops["sm80"]))
        if per_step:
            for key, s in seconds.items():
                step[key] += per_step * s
            step["flops"] += per_step * flops
    if step["flops"]:
        t = {key: step["flops"] / step[key] / 1e12 for key in ("auto", "sm80", "cublas")}
        out.append(("SimpleNet step, 8 GEMMs", "TFLOP/s", t["auto"], t["cublas"], t["sm80"]))
    for label, m, n, k, ta, tb, _ in SHAPES[:3]:  # the same kernels with bfloat16 operands
        a, b = operands(m, n, k, ta, tb, "bfloat16")
        flops = 2.0 * m * n * k
        cublas = cublas_timed(a.T if ta else a, b.T if tb else b, repeat)[0]
        auto = graph_timed(_ours(a, b, ta, tb, "auto"), repeat)
        sm80 = graph_timed(_ours(a, b, ta, tb, "sm80"), repeat)
        out.append((f"bf16 {label}", "TFLOP/s", flops / auto / 1e12, flops / cublas / 1e12,
                    flops / sm80 / 1e12))  # fmt: skip
    return out


SWEEP_SHAPES = [
    *((label, m, n, k, ta, tb) for label, m, n, k, ta, tb, _ in SHAPES[:3]),
    ("GEMM 4096x4096x512 TN", 4096, 4096, 512, True, False),
    ("GEMM 2048^3", 2048, 2048, 2048, False, False),
    ("GEMM 1024x4096x1024 NT", 1024, 4096, 1024, False, True),
]


def sweep(repeat: int):
    """Every schedule and split of the Hopper kernel on each shape, against cuBLAS."""
    cp = device.cupy
    out = []
    for label, m, n, k, ta, tb in SWEEP_SHAPES:
        a, b = operands(m, n, k, ta, tb)
        op_a, op_b = (a.T if ta else a), (b.T if tb else b)
        flops = 2.0 * m * n * k
        cublas = flops / cublas_timed(op_a, op_b, repeat, warmup_s=0.3)[0] / 1e12
        chosen = gemm_sm90.plan(m, n, k, cp.cuda.Device().attributes["MultiProcessorCount"])
        for bn, pingpong in gemm_sm90.SCHEDULES:
            for splits in (1, 2, 4):
                with gemm_sm90.forced_plan(bn, splits, pingpong):
                    run = _ours(a, b, ta, tb, "sm90")
                    ours = flops / graph_timed(run, repeat, warmup_s=0.1) / 1e12
                rule = (chosen.bn, chosen.splits, chosen.pingpong) == (bn, splits, pingpong)
                name = f"{label} bn={bn}{' ping-pong' if pingpong else ''} split={splits}"
                out.append((name + (" (rule)" if rule else ""), "TFLOP/s", ours, cublas, None))
    return out
