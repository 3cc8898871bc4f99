"""Host cost of one kernel launch, by path, and of one Hopper GEMM call, by piece (GPU only).

    python benchmarks/launch_cost.py            # the tables: about 10 s after the compile
    python benchmarks/launch_cost.py --profile  # and cProfile's top functions of gemm.gemm

Issue 24 asks for the cheapest honest way to launch a raw kernel. One launch of
``cast.cu``'s ``cast_f32_to_f16`` on 1024 elements (its GPU time is a few µs, below the
host's, so the launch queue never fills and the host is what is timed) goes through:

* ``kernels.launch``: the project's one launcher (a dict lookup, then CuPy's call);
* CuPy's ``RawKernel.__call__`` on the same compiled function, the launcher's last step;
* the driver's ``cuLaunchKernel`` through ``ctypes``, the arguments packed anew each call
  (what any launcher must do: the pointers change between calls);
* ``cuLaunchKernel`` through the ``cuda-python`` bindings (``cuda.bindings.driver``), when
  they are installed;
* ``cast.cast``, the whole op (its checks and the output's allocation included), and
  PyTorch's ``x.to(torch.float16)`` on the same device, when PyTorch has CUDA.

Then the pieces of one float16 GEMM call on the Hopper path (256 x 256 x 256): the whole
``gemm.gemm``, its tensor map (found in the cache, and encoded anew), the kernel choice, the
plan, the output's allocation, CuPy's cuBLAS matmul and PyTorch's ``torch.mm`` beside it.

Each figure is host µs per call: the median over 15 rounds of 200 calls timed with
``time.perf_counter``, the device synchronised before each round and not inside it, after a
warm-up of at least 1 s of the same calls.

``--stand-in`` times, on any machine, the part of a ``gemm.gemm`` call that is the project's
own Python: CuPy is stood in for by NumPy arrays that carry an address, and the tensor
maps' driver call, CuPy's allocation and the launch itself do nothing, so what is timed is
the checks, the kernel choice, the recipe, the tensor-map cache and the argument packing,
on each kernel's path (``gemm_sm90.cu`` on a Hopper GPU, ``gemm_fp16.cu`` elsewhere).
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from gpu_stand_in import StandInArray, stand_in

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout

import minitorch_amp as mt
from minitorch_amp.backend import cast as _cast
from minitorch_amp.backend import device as _device
from minitorch_amp.backend import gemm, gemm_sm90, kernels, tensor_maps

CALLS, ROUNDS = 200, 15
WARMUP_S = 1.0  # the first row's warm-up: the GPU's clocks rise; 0.2 s for each row after


def per_call_us(fn, sync, warmup_s: float) -> float:
    """Median host µs of one ``fn()`` over ``ROUNDS`` rounds of ``CALLS`` calls."""
    end = time.perf_counter() + warmup_s
    while time.perf_counter() < end:
        for _ in range(CALLS):
            fn()
        sync()
    rounds = []
    for _ in range(ROUNDS):
        sync()
        start = time.perf_counter()
        for _ in range(CALLS):
            fn()
        rounds.append((time.perf_counter() - start) / CALLS * 1e6)
        sync()
    return statistics.median(rounds)


def measure(rows, sync) -> list[tuple[str, str]]:
    """``(label, fn)`` rows (``fn`` None: not available here) -> ``(label, µs or why)``;
    a row that fails says so and the others still run."""
    done, warmup_s = [], WARMUP_S
    for label, fn, *own_sync in rows:
        if fn is None:
            done.append((label, "not available here"))
            continue
        try:
            done.append(
                (label, f"{per_call_us(fn, own_sync[0] if own_sync else sync, warmup_s):.2f}")
            )
        except Exception as exc:  # a benchmark row, not the library: report and go on
            done.append((label, f"failed: {type(exc).__name__}: {exc}"))
        warmup_s = 0.2
    return done


def _cu_launch_kernel():
    launch = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    launch.restype = ctypes.c_int
    return launch


def _checked(status) -> None:
    if status:
        raise RuntimeError(f"cuLaunchKernel failed: CUresult {status}")


def _pack(*values):
    """A ``void**`` kernel-parameter array over ctypes ``values`` (kept alive with it)."""
    params = (ctypes.c_void_p * len(values))(*(ctypes.addressof(v) for v in values))
    params.values = values
    return params


def _bindings_row(function, stream, grid, threads, x, out, n):
    """``cuLaunchKernel`` through ``cuda.bindings.driver``, or None where not installed."""
    try:
        from cuda.bindings import driver
    except ImportError:
        return None
    handle = driver.CUfunction(function)
    types = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)

    def run() -> None:
        params = ((x.data.ptr, out.data.ptr, n), types)
        (status,) = driver.cuLaunchKernel(handle, grid, 1, 1, threads, 1, 1, 0, stream, params, 0)
        _checked(int(status))

    return run


def _torch_cuda():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def launch_rows(cp):
    n, threads, name = 1024, 256, "cast_f32_to_f16"
    x = cp.ones(n, dtype=np.float32)
    out = cp.empty(n, dtype=np.float16)
    args, grid = (x, out, np.int64(n)), (n + threads - 1) // threads
    raw = kernels.get_function("cast.cu", name)
    function = getattr(raw, "kernel", raw).ptr  # the CUfunction CuPy loaded
    stream = cp.cuda.get_current_stream().ptr
    launch = _cu_launch_kernel()
    prepared = _pack(ctypes.c_void_p(x.data.ptr), ctypes.c_void_p(out.data.ptr), ctypes.c_int64(n))

    def driver() -> None:  # the arguments packed anew, as any launcher must
        params = _pack(
            ctypes.c_void_p(x.data.ptr), ctypes.c_void_p(out.data.ptr), ctypes.c_int64(n)
        )
        _checked(launch(function, grid, 1, 1, threads, 1, 1, 0, stream, params, None))

    def driver_prepared() -> None:
        _checked(launch(function, grid, 1, 1, threads, 1, 1, 0, stream, prepared, None))

    rows = [
        ("kernels.launch", lambda: kernels.launch("cast.cu", name, (grid,), (threads,), args)),
        ("CuPy RawKernel.__call__", lambda: raw((grid,), (threads,), args)),
        ("cuLaunchKernel via ctypes", driver),
        ("cuLaunchKernel via ctypes, arguments packed once", driver_prepared),
        (
            "cuLaunchKernel via cuda.bindings",
            _bindings_row(function, stream, grid, threads, x, out, n),
        ),
        ("cast.cast (the op: checks, allocation, launch)", lambda: _cast.cast(x, "float16")),
    ]
    torch = _torch_cuda()
    if torch is not None:
        t = torch.ones(n, device="cuda")
        rows.append(
            ("PyTorch x.to(torch.float16)", lambda: t.to(torch.float16), torch.cuda.synchronize)
        )
    return rows


def gemm_rows(cp):
    size = 256
    a = cp.ones((size, size), dtype=np.float16)
    c = cp.empty((size, size), dtype=np.float16)
    a32 = a.astype(np.float32)
    hopper = gemm_sm90.usable(a, a, size)
    rows = [
        ("gemm.gemm (allocates its output)", lambda: gemm.gemm(a, a)),
        ("gemm.gemm(c=...) (no allocation)", lambda: gemm.gemm(a, a, c=c)),
        ("  gemm_sm90.usable", lambda: gemm_sm90.usable(a, a, size)),
        ("  gemm_sm90.plan", lambda: gemm_sm90.plan(size, size, size, gemm_sm90.sm_count())),
        (
            "  gemm_sm90.operand_map, found in the cache",
            (lambda: gemm_sm90.operand_map(a, True, 128)) if hopper else None,
        ),
        (
            "  tensor_maps._encode_now, encoded anew",
            (lambda: tensor_maps._encode_now(a, (64, 128))) if hopper else None,
        ),
        ("  cupy.empty, the output", lambda: cp.empty((size, size), dtype=np.float16)),
        ("CuPy cuBLAS float32 matmul", lambda: cp.matmul(a32, a32)),
    ]
    torch = _torch_cuda()
    if torch is not None:
        ta = torch.ones((size, size), device="cuda", dtype=torch.float16)
        rows.append(("PyTorch torch.mm float16", lambda: torch.mm(ta, ta), torch.cuda.synchronize))
    return rows, hopper


def profile_gemm(cp, calls: int = 2000) -> str:
    a = cp.ones((256, 256), dtype=np.float16)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        gemm.gemm(a, a)
    profiler.disable()
    cp.cuda.Device().synchronize()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(15)
    return text.getvalue()


def stand_in_rows(hopper: bool, size: int = 256):
    """``gemm.gemm``'s own Python on ``size``-cubed float16 operands, on the stand-in."""
    a, c = (np.ones((size, size), np.float16).view(StandInArray) for _ in range(2))
    bias = np.zeros(size, np.float16).view(StandInArray)
    return [
        ("gemm.gemm", lambda: gemm.gemm(a, a)),
        ("gemm.gemm(c=...)", lambda: gemm.gemm(a, a, c=c)),
        (
            "gemm.gemm, bias, ReLU, b transposed",
            lambda: gemm.gemm(a, a, transpose_b=True, bias=bias, relu=True),
        ),
    ]


def print_stand_in() -> None:
    print(
        f"the Python of one gemm.gemm call, CuPy and the GPU stood in for (launch_cost.py "
        f"--stand-in): Python {sys.version.split()[0]}, NumPy {np.__version__}; host µs per "
        f"call, median of {ROUNDS} rounds of {CALLS} calls after >= {WARMUP_S} s of warm-up"
    )
    for hopper, kernel in ((True, "gemm_sm90.cu"), (False, "gemm_fp16.cu")):
        with stand_in(hopper):
            rows = measure(stand_in_rows(hopper), lambda: None)
        print_rows(f"float16, 256 x 256 x 256, the path to {kernel}", rows)


def print_rows(title: str, rows) -> None:
    print(f"\n{title}\n| what | host µs per call |\n|---|---|")
    for what, us in rows:
        print(f"| {what} | {us} |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="cProfile 2000 gemm.gemm calls")
    parser.add_argument(
        "--stand-in",
        action="store_true",
        help="time gemm.gemm's own Python on the CPU, CuPy and the GPU stood in for",
    )
    args = parser.parse_args(argv)
    if args.stand_in:
        print_stand_in()
        return 0
    cp = _device.cupy
    if cp is None or not mt.device.cuda.device_count():
        print(
            "launch_cost.py: nothing to measure here: no CuPy or no NVIDIA GPU (it times launches)"
        )
        return 0
    mt.set_device("gpu")
    sync = cp.cuda.Device().synchronize
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    print(
        f"launch cost on {props['name'].decode()}: CuPy {cp.__version__}, Python "
        f"{sys.version.split()[0]}; host µs per call, median of {ROUNDS} rounds of {CALLS} "
        f"un-synchronised calls after >= {WARMUP_S} s of warm-up"
    )
    print_rows("one launch of cast_f32_to_f16, 1024 elements", measure(launch_rows(cp), sync))
    rows, hopper = gemm_rows(cp)
    kernel = "gemm_sm90.cu" if hopper else "gemm_fp16.cu"
    print_rows(f"one float16 GEMM, 256 x 256 x 256 ({kernel})", measure(rows, sync))
    if args.profile:
        print("\ncProfile of 2000 gemm.gemm calls, by own time:\n")
        print(profile_gemm(cp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
