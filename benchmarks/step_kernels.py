"""The GPU kernels of one SimpleNet training step, by GPU time (torch.profiler; GPU only).

    python benchmarks/step_kernels.py --full                       # O2: float16, bf16, FP8
    python benchmarks/step_kernels.py --mode O1 --dtypes float16   # one mode, one dtype

The step is ``examples/simple_net.py``'s (``--full``: width 4096, batch 512; else 1024 and
64): SGD, a GradScaler for float16, ``amp.decorate`` at O2, and for ``float8`` a bfloat16
``auto_cast`` with the Linear GEMMs in FP8 inside ``amp.fp8_autocast``. After a warm-up of
at least 1 s, ``torch.profiler`` (which sees CuPy's kernels too) records ``--steps`` steps;
each table lists the kernels, memsets and copies by GPU µs per step, so a mode that is
slower on the GPU shows where its time goes (issue 28: the FP8 graph step is slower than the
float16 one). GPU time per step is the sum of the activities' durations, not wall time.

A second table lists the CUDA runtime and driver calls the host made per step (CUPTI's
records, through the same profiler) with their host µs, the calls that make the host wait
for the GPU marked: where an eager step that should run ahead of the GPU does not (on an
H200 the O1 step of ``examples/simple_net.py --compare --full`` took 2.14 ms, where
``host_profile.py`` timed the host's part of a wide O1 step, with Adam, at 1.57 ms), a call
that waits shows there. The profiled block ends with one ``synchronize`` of its own:
``1 / --steps`` of a ``cudaDeviceSynchronize`` per step is that.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.backend import device as _device

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from simple_net import SimpleNet, make_data

DTYPES = ("float16", "bfloat16", "float8")


def make_step(mode: str, dtype: str, width: int, batch: int):
    """One eager training step of ``mode`` (fp32, O1, O2) in ``dtype``; returns ``step()``."""
    mt.seed(0)
    model = SimpleNet(width, width)
    optimizer = mt.optimizer.SGD(learning_rate=1e-4, parameters=model.parameters())
    (x,), (y,) = make_data(width, batch, 1)
    mse = nn.MSELoss()
    amp_dtype = "bfloat16" if dtype == "float8" else dtype
    scaler = amp.GradScaler(enable=mode != "fp32" and dtype == "float16", init_loss_scaling=1024)
    if mode == "O2":
        model, optimizer = amp.decorate(model, optimizer, level="O2", dtype=amp_dtype)
    fp8 = amp.fp8_autocast(enabled=dtype == "float8" and mode != "fp32")
    level = "O1" if mode == "fp32" else mode  # fp32: auto_cast is off, the level unused

    def step():
        with amp.auto_cast(enable=mode != "fp32", level=level, dtype=amp_dtype), fp8:
            loss = mse(model(x), y)
        scaler.scale(loss).backward()
        scaler.minimize(optimizer, loss)
        optimizer.clear_grad()
        return loss

    return step


def profile_step(step, sync, steps: int) -> tuple[dict, dict]:
    """``(kernels, api)`` over ``steps`` profiled steps: kernel name -> [launches per step,
    GPU µs per step], and CUDA API call -> [calls per step, host µs per step]."""
    from torch.profiler import ProfilerActivity, profile

    end = time.perf_counter() + 1.0  # warm-up: compiles, then clocks up
    while time.perf_counter() < end:
        step()
        sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        sync()
    return tabulate(prof.events(), steps)


def tabulate(events, steps: int) -> tuple[dict, dict]:
    """The profiler's events as :func:`profile_step`'s two tables: the GPU's activities by
    GPU time, and the host's CUDA runtime (``cuda...``) and driver (``cu...``) calls by host
    time. Anything else the host recorded (PyTorch's own operators) is left out."""
    kernels, api = defaultdict(lambda: [0.0, 0.0]), defaultdict(lambda: [0.0, 0.0])
    for event in events:
        if event.device_type.name == "CUDA":
            row, us = kernels[event.name], event.device_time  # µs
        elif event.name.startswith("cu"):
            row, us = api[event.name], event.cpu_time_total  # µs
        else:
            continue
        row[0] += 1 / steps
        row[1] += us / steps
    return dict(kernels), dict(api)


# Calls that return only once the GPU has done what was queued before them (or, for the
# allocator's, may): an eager step that makes one per step cannot run ahead of the GPU.
WAITS = frozenset(
    {
        "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
        "cudaMemcpy", "cudaMemcpy2D", "cudaMemset", "cudaMalloc", "cudaFree",
        "cudaFreeHost", "cudaHostAlloc", "cudaMallocHost", "cuCtxSynchronize",
        "cuStreamSynchronize", "cuEventSynchronize", "cuMemcpyDtoH_v2", "cuMemcpyHtoD_v2",
        "cuMemcpy", "cuMemAlloc_v2", "cuMemFree_v2", "cuMemsetD8_v2", "cuMemsetD32_v2",
    }
)  # fmt: skip


def print_table(title: str, table: dict, top: int) -> None:
    total = sum(us for _, us in table.values())
    count = sum(n for n, _ in table.values())
    print(f"\n{title}: {count:.0f} GPU activities, {total:.1f} GPU µs per step")
    print("| kernel | per step | GPU µs per step | % |\n|---|---|---|---|")
    ranked = sorted(table.items(), key=lambda item: -item[1][1])
    for name, (n, us) in ranked[:top]:
        print(f"| `{name[:90]}` | {n:.0f} | {us:.1f} | {100 * us / total:.1f} |")
    if len(ranked) > top:
        rest = sum(us for _, (_, us) in ranked[top:])
        print(f"| {len(ranked) - top} others | | {rest:.1f} | {100 * rest / total:.1f} |")


def print_api(title: str, api: dict, top: int) -> None:
    """The host's CUDA API calls of a step by host time, those in :data:`WAITS` marked."""
    total = sum(us for _, us in api.values())
    print(f"\n{title}: CUDA API calls, {total:.1f} host µs per step")
    if not api:
        print("(none recorded: this PyTorch's profiler does not report them)")
        return
    print("| call | per step | host µs per step | waits for the GPU |\n|---|---|---|---|")
    ranked = sorted(api.items(), key=lambda item: -item[1][1])
    for name, (n, us) in ranked[:top]:
        print(f"| `{name}` | {n:.2f} | {us:.1f} | {'yes' if name in WAITS else ''} |")
    waiting = [name for name, _ in ranked[top:] if name in WAITS]
    if len(ranked) > top:
        rest = sum(us for _, (_, us) in ranked[top:])
        also = f" (waiting: {', '.join(waiting)})" if waiting else ""
        print(f"| {len(ranked) - top} others{also} | | {rest:.1f} | |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="width 4096, batch 512")
    parser.add_argument("--mode", nargs="+", default=["O2"], choices=("fp32", "O1", "O2"))
    parser.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=DTYPES)
    parser.add_argument("--steps", type=int, default=5, help="profiled steps")
    parser.add_argument("--top", type=int, default=15, help="kernels listed per table")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        torch = None
    cp = _device.cupy
    if cp is None or not mt.device.cuda.device_count() or torch is None:
        print(
            "step_kernels.py: nothing to measure here: it needs CuPy on an NVIDIA GPU and PyTorch"
        )
        return 0
    mt.set_device("gpu")
    width, batch = (4096, 512) if args.full else (1024, 64)
    sync = cp.cuda.Device().synchronize
    name = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"].decode()
    modes = ", ".join(args.mode)
    print(f"one SimpleNet step on {name}: width {width}, batch {batch}, {modes}, SGD")
    for mode in args.mode:
        for dtype in args.dtypes:
            kernels, api = profile_step(make_step(mode, dtype, width, batch), sync, args.steps)
            print_table(f"{mode} {dtype}", kernels, args.top)
            print_api(f"{mode} {dtype}", api, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
