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
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

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


def profile_step(step, sync, steps: int) -> dict[str, list[float]]:
    """Kernel name -> [launches per step, GPU µs per step] over ``steps`` profiled steps."""
    from torch.profiler import ProfilerActivity, profile

    end = time.perf_counter() + 1.0  # warm-up: compiles, then clocks up
    while time.perf_counter() < end:
        step()
        sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        sync()
    table = defaultdict(lambda: [0.0, 0.0])
    for event in prof.events():
        if event.device_type.name == "CUDA":
            row = table[event.name]
            row[0] += 1 / steps
            row[1] += event.device_time / steps  # µs
    return dict(table)


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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="width 4096, batch 512")
    parser.add_argument("--mode", default="O2", choices=("fp32", "O1", "O2"))
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
    print(f"one SimpleNet step on {name}: width {width}, batch {batch}, {args.mode}, SGD")
    for dtype in args.dtypes:
        step = make_step(args.mode, dtype, width, batch)
        print_table(f"{args.mode} {dtype}", profile_step(step, sync, args.steps), args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
