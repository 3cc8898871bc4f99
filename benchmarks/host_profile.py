"""Where the host time of one eager training step goes: µs per part and per op, fp32/O1/O2.

The step is SimpleNet's (``examples/simple_net.py``: three Linear layers, ReLU between, MSE,
backward, ``GradScaler`` for O1/O2, an optimizer), at two sizes: the tiny AMP step (width 64,
batch 8), whose arithmetic is nothing, and ``--width``/``--batch`` (the example's 1024/64;
``--full`` 4096/512). Each part's time is measured by wrapping the library's functions from
the outside, for the length of a step, and is *exclusive*: a function's time less the time of
the wrapped functions it calls, so the parts add up to the step:

==========  ==================================================================================
part        the functions whose own time it is
==========  ==================================================================================
layers      ``nn.Layer.__call__``, every layer's ``forward``, ``nn.functional``, Tensor operators
dispatch    ``autograd.dispatch.apply`` and ``promote``, less everything below (the input scan
            that decides whether to record is inside ``apply``: it counts here)
amp         ``auto_cast`` (construction, enter, exit) and the per-op rule with its cast cache
            (``dispatch.hooks.autocast``); the casts it dispatches are ops of their own (``cast``)
record      the ``Context`` and ``Node`` objects ``apply`` makes
allocation  ``Tensor._wrap``, ``Tensor.__init__``, ``backend.memory.track``; on a GPU also
            CuPy's allocator (the memory pool's ``malloc``)
launch      every op's ``forward`` and ``backward``, the ``backend`` primitives, casts, GEMM,
            loss-scaling and fused-optimizer functions, ``kernels.launch``, the optimizer's
            ``_update``/``_advance`` and ``Bucket._twin``, ``seeds.initial_grad``,
            ``_conform``, ``_accumulate_leaf``: where array work is issued. On a GPU the host
            cost of issuing kernels; on the CPU NumPy computes as it is called, so this is the
            arithmetic itself
engine      ``autograd.engine.backward``: the graph walk and the gradients' bookkeeping
scaler      ``GradScaler.scale``, ``unscale_``, ``step``, ``minimize``, ``update``
optimizer   ``Optimizer.step``, ``minimize``, ``clear_grad``: grouping, the plan, the buckets
other       the rest: the step function itself, Tensor methods, time between wrapped calls
==========  ==================================================================================

Per op: every ``apply`` of the step by op name (its ``cast`` ops included), every op's
backward, and the phases (backward engine, scaler, optimizer: the calls of their entry
points), with calls per step, µs per call and the parts inside. Per function: the calls and
own µs per call of each wrapped function (``dispatch.apply``, ``memory.track``, ...).

**The instrumentation's own cost** is taken out: an empty wrapped function is timed against
the bare one (:func:`calibrate`, between the blocks of steps), which gives the cost of one
wrapped call and how much of it falls inside the wrapped function's own timed region (the
rest falls in its caller's). Each call loses the inside share, and the outside share of each
wrapped call made from inside it; the tables show what remains, and beside it the raw
instrumented step and the step timed without any instrumentation. The two totals should
agree; their difference is the error of the method.

After a warm-up, the steps with and without instrumentation take turns in short blocks.
NOTE: a part's numbers are means over
the middle half of the steps (the interquartile mean, by step time), not medians: medians of
parts do not add up to a median step. The uninstrumented step shows both. On a GPU the host
time is ``time.perf_counter`` around an un-synchronised step (the device drained before it),
the GPU time CUDA events around the same step, and the launches are counted twice: raw kernels
through ``kernels.launch``, and every kernel, memset and copy with ``torch.profiler`` when
PyTorch has CUDA (``benchmarks/simple_net.py``'s count).

    python benchmarks/host_profile.py                   # tiny, then 1024 / 64: ~85 s on 2 cores
    python benchmarks/host_profile.py --sizes tiny      # the tiny step only: ~15 s
    python benchmarks/host_profile.py --full --device gpu   # width 4096, batch 512, on a GPU
    python benchmarks/host_profile.py --sizes tiny --gpu-stand-in   # the GPU path, on the CPU

``--gpu-stand-in`` profiles the GPU path's own Python on any machine: CuPy and a Hopper GPU
are stood in for (``benchmarks/gpu_stand_in.py``: NumPy arrays posing as CuPy's, launches
recorded and not run), so the ``launch`` part is the ops' Python without CuPy's launches, and
the "GPU time" row is host time.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import platform
import statistics
import sys
from collections import defaultdict
from dataclasses import astuple, dataclass
from pathlib import Path
from time import perf_counter

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))  # its SimpleNet

import gpu_stand_in
from host_parts import (  # noqa: F401 (PARTS, HostProfile, install: host_profile's API too)
    LAUNCH,
    OTHER,
    OVERHEAD,
    PARTS,
    Calibration,
    HostProfile,
    StepRecord,
    calibrate,
    install,
)
from host_tables import print_functions, print_ops, print_parts, print_steps
from simple_net import SimpleNet
from timing import warm_up, warmup_seconds

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.backend import device as _device
from minitorch_amp.utils.progress import progress

MODES = ("fp32", "O1", "O2")
TINY = (64, 8)  # width, batch: the tiny AMP step


# ---- the step --------------------------------------------------------------------------------
def build_step(mode: str, width: int, batch: int, optimizer: str = "Adam"):
    """One training step of a fresh SimpleNet in ``mode``, written as
    ``benchmarks/simple_net.py`` writes it; ``step()`` reads nothing from the device."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} is not one of {MODES}")
    mt.seed(0)
    model = SimpleNet(width, width)
    if optimizer == "Adam":
        opt = mt.optimizer.Adam(learning_rate=1e-3, parameters=model.parameters())
    else:
        opt = mt.optimizer.SGD(learning_rate=1e-4, parameters=model.parameters())
    mse = nn.MSELoss()
    x, y = mt.randn([batch, width]), mt.randn([batch, width])
    if mode == "fp32":

        def step():
            loss = mse(model(x), y)
            loss.backward()
            opt.step()
            opt.clear_grad()

        return step
    if mode == "O2":
        model, opt = amp.decorate(model, opt, level="O2")
    scaler = amp.GradScaler(init_loss_scaling=1024.0)

    def step():
        with amp.auto_cast(level=mode):
            loss = mse(model(x), y)
        scaler.scale(loss).backward()
        scaler.minimize(opt, loss)
        opt.clear_grad()

    return step


# ---- measuring -------------------------------------------------------------------------------
def on_gpu() -> bool:
    return str(mt.get_device()).startswith("gpu")


def plain_step(step, sync, events) -> tuple[float, float | None]:
    """Host seconds of one uninstrumented ``step()`` (the device drained before it, not
    after) and, on a GPU, its milliseconds between two CUDA events."""
    sync()
    if events:
        events[0].record()
    start = perf_counter()
    step()
    host = perf_counter() - start
    if not events:
        return host, None
    events[1].record()
    events[1].synchronize()
    return host, _device.cupy.cuda.get_elapsed_time(*events)


def middle_half(values: list, key=None) -> list:
    """The values between the first and the third quartile (by ``key``)."""
    ranked = sorted(values, key=key)
    cut = len(ranked) // 4
    return ranked[cut : len(ranked) - cut]


@dataclass
class ModeProfile:
    """One mode's numbers, in µs per step (means over the middle half of the steps)."""

    plain_median: float  # uninstrumented
    plain_mean: float
    gpu: float | None  # µs between CUDA events; None on the CPU
    raw: float  # instrumented
    total: float  # instrumented, less the instrumentation: what the parts add up to
    wrapped_calls: float
    parts: dict  # part (and OTHER) -> µs
    ops: dict  # op or phase -> {"calls": n, part: µs, ...}
    functions: dict  # function -> {"part": part, "calls": n, "us": µs}
    cost: Calibration  # in the step: what the tables are corrected by
    loop_cost: Calibration  # of an empty function in a loop
    activities: int | None = None  # GPU kernels, memsets, copies of a step (torch.profiler)


def in_step_cost(doubled: list, loop: Calibration) -> Calibration:
    """One wrapped call's cost in the step, from steps with every function wrapped twice: the
    outer wrappers' own time per call. Its inside share is the empty loop's."""
    kept = middle_half(doubled, key=lambda r: r.total)
    seconds = calls = 0.0
    for record in kept:
        for (_, part, _), (s, n, _) in record.cells.items():
            if part == OVERHEAD:
                seconds, calls = seconds + s, calls + n
    per_call = seconds / calls
    share = min(max(loop.inside / loop.per_call, 0.0), 1.0) if loop.per_call > 0 else 1.0
    return Calibration(per_call, per_call * share)


def summarize(records, plain, gpu, cost: Calibration, loop: Calibration) -> ModeProfile:
    """The steps' means over their middle half, less the instrumentation's cost."""
    kept = middle_half(records, key=lambda r: r.total)
    n = len(kept)
    parts = dict.fromkeys((*PARTS, OTHER), 0.0)
    ops: dict = defaultdict(lambda: defaultdict(float))
    functions: dict = {}
    wrapped = 0.0
    for record in kept:
        for (op, part, function), (seconds, calls, inside) in record.cells.items():
            us = cost.corrected(seconds, calls, inside) * 1e6 / n
            parts[part] += us
            wrapped += calls / n
            if op is not None:
                ops[op][part] += us
            if function is not None:
                row = functions.setdefault(function, {"part": part, "calls": 0.0, "us": 0.0})
                row["calls"] += calls / n
                row["us"] += us
        for op, calls in record.calls.items():
            ops[op]["calls"] += calls / n
    raw = statistics.fmean(r.total for r in kept) * 1e6
    return ModeProfile(
        plain_median=statistics.median(plain) * 1e6,
        plain_mean=statistics.fmean(middle_half(plain)) * 1e6,
        gpu=statistics.fmean(middle_half(gpu)) * 1e3 if gpu else None,
        raw=raw,
        total=raw - wrapped * cost.per_call * 1e6,
        wrapped_calls=wrapped,
        parts=parts,
        ops={op: dict(row) for op, row in ops.items()},
        functions=functions,
        cost=cost,
        loop_cost=loop,
    )


def profile_mode(step, steps: int, block: int, warmup: int, warmup_s: float, desc=None):
    """Time ``step`` in alternating blocks: uninstrumented, instrumented, and with every
    function wrapped twice (what one wrapped call costs in the step); the :class:`ModeProfile`.

    NOTE: no pause between the blocks, unlike ``timing.interleave``: that pause lets another
    framework's threads go to sleep, and here every block runs ours. Short blocks follow the
    machine's slow swings (on the shared 2-core machine the same tiny step took 1.4 ms in
    one block of 20 and 2.4 ms in another) better than long ones.
    """
    sync = mt.device.synchronize
    warm_up(step, sync, warmup_s, warmup)
    events = (_device.cupy.cuda.Event(), _device.cupy.cuda.Event()) if on_gpu() else None
    profile = HostProfile()
    plain, gpu, records, doubled, loops = [], [], [], [], []
    for _ in progress(range(-(-steps // block)), desc=desc):
        count = min(block, steps - len(plain))
        step()  # untimed: wakes the thread pools
        for _ in range(count):
            host, ms = plain_step(step, sync, events)
            plain.append(host)
            gpu += [] if ms is None else [ms]
        loops.append(calibrate())
        for into, twice in ((records, False), (doubled, True)):
            patches = [install(profile)]
            try:
                if twice:
                    patches.append(install(HostProfile(profile.log, OVERHEAD)))
                profile.run_step(step)  # untimed, as above
                for _ in range(count):
                    sync()
                    into.append(profile.run_step(step))
            finally:
                for p in reversed(patches):
                    p.undo()
    loop = Calibration(*(statistics.median(c) for c in zip(*map(astuple, loops))))
    result = summarize(records, plain, gpu, in_step_cost(doubled, loop), loop)
    if on_gpu() and not isinstance(_device.cupy, gpu_stand_in.StandInCupy):
        result.activities = _simple_net_benchmark().count_gpu_activities(step, sync)
    return result


@functools.cache
def _simple_net_benchmark():
    """``benchmarks/simple_net.py``, for its ``torch.profiler`` count of a step's kernels."""
    spec = importlib.util.spec_from_file_location(
        "simple_net_benchmark", Path(__file__).with_name("simple_net.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # its own ``from simple_net import`` finds the example
    return module


# ---- the command -----------------------------------------------------------------------------
def device_line() -> str:
    """Where the numbers come from: the device, the versions that matter, the CPU's load."""
    if on_gpu():
        cupy = _device.cupy
        name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"].decode()
        where = f"{mt.get_device()}: {name}, CuPy {cupy.__version__}"
    else:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        where = f"cpu: {platform.machine()}, {cores} cores"
    load = f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    return (
        f"{where}; minitorch_amp {mt.__version__}, Python {platform.python_version()}, "
        f"NumPy {np.__version__}{load}"
    )


def run_size(name: str, width: int, batch: int, args) -> dict:
    """Profile every mode at one size and print its tables; the :class:`ModeProfile` s."""
    steps = args.steps or (400 if name == "tiny" else 4 if args.full else 20)
    block = args.block or max(1, min(10, steps // 10))
    warmup = args.warmup if args.warmup is not None else (1 if steps < 10 else 5)
    results = {}
    for mode in args.modes:
        step = build_step(mode, width, batch, args.optimizer)
        warmup_s = warmup_seconds(on_gpu())
        results[mode] = profile_mode(step, steps, block, warmup, warmup_s, f"{name} {mode}")
    print(f"\n### {name}: 3 x Linear {width}->{width}, batch {batch}, {args.optimizer}")
    print(f"({steps} steps uninstrumented, instrumented and wrapped twice, in blocks of {block})")
    print()
    print_steps(results)
    print()
    print_parts(results)
    for mode, result in results.items():
        print_ops(mode, result, args.top)
    print_functions(results, args.top)
    return results


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--sizes",
        nargs="+",
        default=["tiny", "wide"],
        choices=["tiny", "wide"],
        help="tiny: width 64, batch 8; wide: --width and --batch",
    )
    parser.add_argument("--width", type=int, default=1024, help="the wide size's width")
    parser.add_argument("--batch", type=int, default=64, help="the wide size's batch")
    parser.add_argument("--full", action="store_true", help="the wide size is 4096 / 512")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES, help="to run")
    parser.add_argument("--optimizer", default="Adam", choices=["Adam", "SGD"], help="the step's")
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help="timed steps of each kind (tiny 400, wide 20, --full 4)",
    )
    parser.add_argument(
        "--block", type=int, default=None, help="steps per block (a tenth, 10 at most)"
    )
    parser.add_argument(
        "--warmup", type=int, default=None, help="untimed steps first (5; 1 --full)"
    )
    parser.add_argument("--top", type=int, default=10, help="rows of the op and function tables")
    parser.add_argument("--device", default=None, help="'cpu', 'gpu' or 'gpu:N'; None: auto")
    parser.add_argument(
        "--gpu-stand-in",
        action="store_true",
        help="the GPU path's Python on the CPU, CuPy and a Hopper GPU stood in for",
    )
    args = parser.parse_args(argv)
    if args.full:
        args.width, args.batch = 4096, 512
    if args.gpu_stand_in:
        if args.device is not None:
            parser.error("--gpu-stand-in is its own device: drop --device")
        with gpu_stand_in.stand_in():
            mt.set_device("gpu:0")
            return _profile(args)
    if args.device is not None:
        mt.set_device(args.device)
    return _profile(args)


def _profile(args) -> dict:
    print(device_line())
    print(
        "Host µs of one eager training step by part, op and function: means over the middle "
        "half of the steps, less the instrumentation's own cost (measured in the step)."
    )
    sizes = {"tiny": TINY, "wide": (args.width, args.batch)}
    return {name: run_size(name, *sizes[name], args) for name in args.sizes}


if __name__ == "__main__":
    main()
