"""The GEMM rows of ``benchmarks/kernels.py``: our GEMM against cuBLAS, side by side.

Each row times, on the same operands in the same process, ``backend.gemm.gemm`` as it
dispatches (the Hopper kernel ``gemm_sm90.cu`` on compute capability 9.0), the same call with
``MINITORCH_AMP_GEMM_KERNEL=sm80`` (the ``mma.sync`` kernel ``gemm_fp16.cu``) and
``cupy.matmul`` (cuBLAS), on fp16 inputs with fp32 accumulation and fp16 output. The shapes
are the issue's three square-ish problems and the GEMMs of one SimpleNet training step at the
tutorial's sizes (width 4096, batch 512): three forward ``x @ W`` (NN), two input gradients
``dy @ W^T`` (NT; the first layer's input needs none) and three weight gradients
``x^T @ dy`` (TN). ``--sweep`` times every tile width and split of the Hopper kernel's shape
rule instead (``gemm_sm90.forced_plan``), which is how the rule's thresholds are chosen.
"""

from __future__ import annotations

import os

from minitorch_amp.backend import device, gemm_sm90
from minitorch_amp.backend.gemm import gemm

# (label, M, N, K, transpose_a, transpose_b, launches per SimpleNet step or 0)
SHAPES = [
    ("GEMM 512x4096x4096", 512, 4096, 4096, False, False, 0),
    ("GEMM 4096^3", 4096, 4096, 4096, False, False, 0),
    ("GEMM 8192^3", 8192, 8192, 8192, False, False, 0),
    ("SimpleNet fwd NN x3", 512, 4096, 4096, False, False, 3),
    ("SimpleNet dgrad NT x2", 512, 4096, 4096, False, True, 2),
    ("SimpleNet wgrad TN x3", 4096, 4096, 512, True, False, 3),
]


def operands(m, n, k, ta, tb):
    cp = device.cupy
    a = cp.random.standard_normal((k, m) if ta else (m, k), dtype=cp.float32).astype(cp.float16)
    b = cp.random.standard_normal((n, k) if tb else (k, n), dtype=cp.float32).astype(cp.float16)
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


def rows(timed, repeat: int):
    """``(label, unit, ours, yardstick, extra)`` rows; ``extra`` is the sm80 kernel's TFLOP/s."""
    cp = device.cupy
    out = []
    step = {"auto": 0.0, "sm80": 0.0, "cublas": 0.0, "flops": 0.0}
    for label, m, n, k, ta, tb, per_step in SHAPES:
        a, b = operands(m, n, k, ta, tb)
        op_a, op_b = (a.T if ta else a), (b.T if tb else b)
        flops = 2.0 * m * n * k
        seconds = {
            "auto": timed(_ours(a, b, ta, tb, "auto"), repeat),
            "sm80": timed(_ours(a, b, ta, tb, "sm80"), repeat),
            "cublas": timed(lambda op_a=op_a, op_b=op_b: cp.matmul(op_a, op_b), repeat),
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
    return out


def sweep(timed, repeat: int):
    """Every (tile width, split) of the Hopper kernel on each shape, against cuBLAS."""
    cp = device.cupy
    out = []
    for label, m, n, k, ta, tb, _ in SHAPES:
        a, b = operands(m, n, k, ta, tb)
        op_a, op_b = (a.T if ta else a), (b.T if tb else b)
        flops = 2.0 * m * n * k
        cublas = flops / timed(lambda op_a=op_a, op_b=op_b: cp.matmul(op_a, op_b), repeat) / 1e12
        chosen = gemm_sm90.plan(m, n, k, cp.cuda.Device().attributes["MultiProcessorCount"])
        for bn in gemm_sm90.TILE_WIDTHS:
            for splits in (1, 2, 4, 8):
                with gemm_sm90.forced_plan(bn, splits):
                    ours = flops / timed(_ours(a, b, ta, tb, "sm90"), repeat) / 1e12
                mark = " (rule)" if (bn, splits) == (chosen.bn, chosen.splits) else ""
                out.append((f"{label} bn={bn} split={splits}{mark}", "TFLOP/s", ours, cublas, None))
    return out
