"""Raw kernels against their yardsticks on a GPU: GEMM vs cuBLAS, cast and optimizer vs copy.

    python benchmarks/kernels.py            # needs CuPy and a CUDA device
    python benchmarks/kernels.py --fp8      # and then the FP8 GEMM against torch._scaled_mm

* GEMM: TFLOP/s of ``backend.gemm.gemm`` against cuBLAS at 512x4096x4096 (SimpleNet's
  layer), 4096^3, 8192^3 and the eight GEMMs of a SimpleNet step; the last column is the
  ``mma.sync`` kernel forced. Kernel time: CUDA-graph replays of 20 launches, cuBLAS as
  ``torch.mm`` in a graph when PyTorch is installed (``benchmarks/gemm_rows.py`` says why).
  The first three shapes again with bfloat16 operands (bf16 rows). ``--sweep`` times every
  schedule and split of the Hopper kernel instead.
* cast: GB/s of the fp32 -> fp16 cast kernel against a device-to-device copy of the same
  number of bytes moved.
* optimizer: GB/s of the fused Adam step with fp32 master weights (reads master, grad, two
  moments; writes master, two moments and the fp16 parameter) against a copy.
* ``--fp8``: after the table, ``benchmarks/fp8_gemm.py``'s table (the FP8 GEMM against
  ``torch._scaled_mm`` at 4096^3 and 8192^3, same ``--repeat``) on a Hopper GPU with PyTorch;
  elsewhere one line saying why it was skipped. The GPU check runs it so.

Timing: random data; one untimed call (it compiles the kernel with NVRTC), at least 1 s of
sustained untimed calls (``timing.warm_up``: the GPU's clocks rise; after 5 calls cuBLAS read
397 TFLOP/s on an H100, 656 after a sustained warm-up), then the median of many runs measured
with CUDA events. The Adam row is an eager ``step()`` (host time included, as a training loop
sees it) and the same step replayed as a CUDA graph (the kernel alone).
Targets on an H100: GEMM >= 0.8x cuBLAS at every shape; cast and optimizer >= 0.85x copy.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import fp8_gemm
import gemm_rows
from timing import GPU_WARMUP_S, warm_up

from minitorch_amp.backend import device


def timed(fn, repeat: int, warmup_s: float = GPU_WARMUP_S) -> float:
    """Median seconds of ``fn()`` over ``repeat`` runs, timed with CUDA events.

    Before them ``fn()`` runs untimed: once (compiling its kernel), then for ``warmup_s``.
    """
    cupy = device.cupy
    warm_up(fn, cupy.cuda.runtime.deviceSynchronize, warmup_s)
    times = []
    for _ in range(repeat):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
    return statistics.median(times)


def bench_gemm(repeat: int):
    return gemm_rows.rows(repeat)


def bench_cast(repeat: int):
    from minitorch_amp.backend.cast import cast

    cupy = device.cupy
    n = 1 << 26
    x = cupy.random.standard_normal(n, dtype=cupy.float32)
    moved = n * (4 + 2)
    ours = moved / timed(lambda: cast(x, np.float16), repeat) / 1e9
    src = cupy.empty(moved // 2, dtype=cupy.uint8)
    dst = cupy.empty_like(src)
    copy = 2 * src.nbytes / timed(lambda: dst.__setitem__(Ellipsis, src), repeat) / 1e9
    return [("cast fp32->fp16", "GB/s", ours, copy)]


def bench_adam(repeat: int):
    from minitorch_amp import nn, optimizer, set_device
    from minitorch_amp.device.cuda.graphs import CUDAGraph

    cupy = device.cupy
    set_device("gpu:0")
    layers = [nn.Linear(2048, 2048) for _ in range(8)]
    params = [p for layer in layers for p in layer.parameters()]
    opt = optimizer.Adam(parameters=params, multi_precision=True)
    for layer in layers:
        layer.to(dtype="float16")
    for p in params:
        p.grad = cupy.ones_like(p._data)
    numel = sum(p.size for p in params)
    opt.step()  # creates the masters and moments
    moved = numel * (4 + 2 + 4 + 4 + 4 + 4 + 4 + 2)
    ours = moved / timed(opt.step, repeat) / 1e9
    # The same step captured and replayed: the kernel's own time, without the host's share
    # of an eager step (CUDA events around an eager call also time its Python launch path).
    graph = CUDAGraph()
    graph.capture_begin()
    opt.step()
    graph.capture_end()
    replayed = moved / timed(graph.replay, repeat) / 1e9
    src = cupy.empty(moved // 2, dtype=cupy.uint8)
    dst = cupy.empty_like(src)
    copy = 2 * src.nbytes / timed(lambda: dst.__setitem__(Ellipsis, src), repeat) / 1e9
    return [
        ("Adam step, fp32 masters", "GB/s", ours, copy),
        ("Adam step, graph replay", "GB/s", replayed, copy),
    ]


def print_fp8_table(repeat: int) -> None:
    """``benchmarks/fp8_gemm.py``'s table, or one line saying why this machine cannot time it."""
    reason = fp8_gemm.why_not_runnable()
    if reason is not None:
        print(f"FP8 GEMM against torch._scaled_mm: skipped: {reason}")
        return
    fp8_gemm.main(["--repeat", str(repeat)])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="time every tile width and split of the Hopper GEMM instead (its shape rule)",
    )
    parser.add_argument(
        "--fp8",
        action="store_true",
        help="then the FP8 GEMM against torch._scaled_mm (benchmarks/fp8_gemm.py; Hopper only)",
    )
    args = parser.parse_args()
    if device.cupy is None:
        print("benchmarks/kernels.py needs CuPy and a CUDA device; none is usable here.")
        return
    name = device.cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    if args.sweep:
        rows = gemm_rows.sweep(args.repeat)
    else:
        rows = bench_gemm(args.repeat) + bench_cast(args.repeat) + bench_adam(args.repeat)
    print(
        f"raw kernels on {name}, median of {args.repeat} runs (CUDA events), "
        f"each after {GPU_WARMUP_S:g} s of untimed warm-up"
    )
    print(f"{'kernel':<44}{'unit':>9}{'ours':>10}{'yardstick':>11}{'ratio':>8}{'sm80':>8}")
    for label, unit, ours, ref, *extra in rows:
        sm80 = f"{extra[0]:>8.1f}" if extra and extra[0] is not None else ""
        print(f"{label:<44}{unit:>9}{ours:>10.1f}{ref:>11.1f}{ours / ref:>8.2f}{sm80}")
    if gemm_rows.cublas_timing:
        print(f"GEMM yardstick: cuBLAS timed as {gemm_rows.cublas_timing}")
    if args.fp8:  # NOTE: after the table, so a stage timed out during the FP8 GEMM keeps it
        print_fp8_table(args.repeat)


if __name__ == "__main__":
    main()
