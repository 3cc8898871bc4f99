"""Host cost of the AMP optimizer step: ``scaler.step(opt); scaler.update()``, ours and PyTorch's.

What an O2 training step spends on the host between backward and the next forward: the
scaler unscales the gradients and looks for inf/NaN, the optimizer updates every parameter,
the scaler moves its scale. The arithmetic is tiny at the default size (tensors of 1024
elements), so the time is the Python and the launches: on a GPU, the host's share of the
step, which is what bounds an eager step at small sizes (docs/benchmarks.md, the H100 section).

The two sides, each as its users write it:

=========  ==============================================  ===================================
           minitorch_amp                                   PyTorch
=========  ==============================================  ===================================
params     float16 (``amp.decorate(level='O2')``), fp32    float32
           master weights in the optimizer
grads      float16                                         float32
optimizer  ``optimizer.SGD/Momentum/Adam/AdamW(...,        ``torch.optim.SGD/SGD(momentum=)/
           parameters=...)``                               Adam/AdamW``, ``fused=True`` on a
                                                           GPU, ``foreach=True`` on the CPU
scaler     ``amp.GradScaler``                              ``torch.amp.GradScaler``
=========  ==============================================  ===================================

Same hyper-parameters on both sides (lr 1e-3, momentum 0.9, Adam's betas and epsilon,
AdamW's weight decay 0.01), the same initial values and gradients, both scalers at 1024
growing every 2000 steps. A model is ``--tensors`` parameter tensors of ``--numel`` elements.

**The gradients do not drift.** Unscaling divides the gradients by the scale in place, so
after two steps they would be 2**20 times smaller, then float16 subnormals or zeros, and the
work would no longer be a training step's (subnormals are slow on some CPUs; an optimizer
might skip zeros). So before every timed call, outside the timed region, each gradient is
refilled in place (``p.grad.set_value(...)``, ``p.grad.copy_(...)``: the same buffers, as
backward writes them in a training loop) with the same scaled values, ``1024 * g`` with
``g ~ N(0, 1)``, which fit float16. The scale stays a real one (a scale of 1 would keep the
gradients without refilling them, but an implementation could skip unscaling by 1).
**No timed step is a skipped one**: before timing, one step must change every parameter
tensor (an overflow would leave them all unchanged), and after timing neither scale may have
dropped (an overflow halves it); :func:`check_step_applies` and :func:`check_no_overflow`
raise otherwise.

**Host time** is ``time.perf_counter`` around one un-synchronised call. NOTE: a GPU queue
can fill up: timing a block of back-to-back calls would then measure the GPU's time, not the
host's, once the host ran ahead by a queue's worth of launches (about a thousand). So each
call is timed on its own, and before it, outside the timed region, the gradients are refilled
and the device is drained, the way :func:`timing.timed` drains it, but only before the call:
the timed region ends when the call returns, with its kernels still queued. What is measured
is what the host spends issuing the step: Python, argument packing, launches, and any host
read of device data the step makes (PyTorch's scaler reads found_inf on the host for a
non-fused optimizer: a real cost of that step, so it is counted). On the CPU there is no
queue and the time is the whole step.

Both frameworks run in the same process, each call warmed up first (``timing.warm_up``: one
call, then more, and on a GPU at least 1 s of sustained work), and take turns: ``--repeats``
turns each of ``--block`` timed calls, each turn after a pause and one untimed call that
wakes the framework's threads (``timing.py`` says why). A cell is the median over the turns'
calls, in µs per ``scaler.step(opt); scaler.update()``.

    python benchmarks/optimizer_step.py                  # 4 optimizers x 16, 160 tensors
    python benchmarks/optimizer_step.py --quick          # fewer calls: a rough picture
    python benchmarks/optimizer_step.py --optimizers Adam --tensors 16 160 1600

PyTorch is required (it is what we compare against); it is never needed by the package.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout

from timing import SETTLE_S, torch_device, warm_up, warmup_seconds

import minitorch_amp as mt
from minitorch_amp import amp, nn
from minitorch_amp.utils import collect_env
from minitorch_amp.utils.progress import progress

OPTIMIZERS = ("SGD", "Momentum", "Adam", "AdamW")
LEARNING_RATE = 1e-3
MOMENTUM = 0.9
WEIGHT_DECAY = 0.01  # AdamW's, Paddle's and PyTorch's default
INIT_SCALE = 1024.0
GROWTH_INTERVAL = 2000  # good steps before the scale doubles, on both sides


@dataclass
class StepRun:
    """One framework's optimizer step, ready to time.

    Attributes:
        step: the timed call, ``scaler.step(opt); scaler.update()``.
        reset: refills every gradient in place with its scaled value (untimed).
        sync: waits for the framework's device (a no-op on a CPU).
        params: host copies of the parameters the model computes with (float16 for ours).
        grads: host copies of the gradients the optimizer reads (float16 for ours).
        scale: the scaler's current loss scale, read on the host.
        scaled_grads: the values ``reset`` refills the gradients with, one tensor each.
    """

    step: Callable[[], None]
    reset: Callable[[], None]
    sync: Callable[[], None]
    params: Callable[[], list[np.ndarray]]
    grads: Callable[[], list[np.ndarray]]
    scale: Callable[[], float]
    scaled_grads: list


def initial_values(tensors: int, numel: int, seed: int = 0) -> tuple[list, list]:
    """``(params, scaled grads)``: float16 NumPy arrays, the same for both frameworks.

    Parameters ~ N(0, 0.1); gradients ``INIT_SCALE * g`` with ``g ~ N(0, 1)``: a step of
    lr 1e-3 moves every float16 parameter, and no scaled gradient overflows float16.
    """
    rng = np.random.default_rng(seed)
    params = [(0.1 * rng.standard_normal(numel)).astype(np.float16) for _ in range(tensors)]
    grads = [(INIT_SCALE * rng.standard_normal(numel)).astype(np.float16) for _ in range(tensors)]
    return params, grads


# ---- minitorch_amp ---------------------------------------------------------------------------
class Tensors(nn.Layer):
    """A model that is nothing but parameters: one 1-D tensor per array of ``values``."""

    def __init__(self, values: list[np.ndarray]):
        super().__init__()
        for i, value in enumerate(values):
            p = self.add_parameter(f"p{i}", self.create_parameter(list(value.shape)))
            p.set_value(value.astype(np.float32))


def ours_optimizer(name: str, parameters: list) -> mt.optimizer.Optimizer:
    """Our optimizer ``name`` over ``parameters``, with the hyper-parameters of both sides."""
    if name == "SGD":
        return mt.optimizer.SGD(learning_rate=LEARNING_RATE, parameters=parameters)
    if name == "Momentum":
        return mt.optimizer.Momentum(
            learning_rate=LEARNING_RATE, momentum=MOMENTUM, parameters=parameters
        )
    if name == "Adam":
        return mt.optimizer.Adam(learning_rate=LEARNING_RATE, parameters=parameters)
    if name == "AdamW":
        return mt.optimizer.AdamW(
            learning_rate=LEARNING_RATE, weight_decay=WEIGHT_DECAY, parameters=parameters
        )
    raise ValueError(f"unknown optimizer {name!r}; choose from {', '.join(OPTIMIZERS)}")


def ours_run(name: str, params: list[np.ndarray], grads: list[np.ndarray]) -> StepRun:
    """Our O2 step: float16 parameters and gradients, fp32 masters in the optimizer."""
    model = Tensors(params)
    optimizer = ours_optimizer(name, model.parameters())
    model, optimizer = amp.decorate(model, optimizer, level="O2", master_weight=True)
    parameters = model.parameters()
    scaler = amp.GradScaler(init_loss_scaling=INIT_SCALE, incr_every_n_steps=GROWTH_INTERVAL)
    scaler.scale(mt.to_tensor(np.float32(1.0)))  # as a step would: the scale meets the loss
    scaled = [mt.to_tensor(g) for g in grads]  # on our device
    for p, g in zip(parameters, grads):
        p.grad = mt.to_tensor(g)

    def step():
        scaler.step(optimizer)
        scaler.update()

    def reset():
        for p, g in zip(parameters, scaled):
            p.grad.set_value(g)

    return StepRun(
        step=step,
        reset=reset,
        sync=mt.device.synchronize,
        params=lambda: [p.numpy().copy() for p in parameters],
        grads=lambda: [p.grad.numpy().copy() for p in parameters],
        scale=lambda: float(scaler.get_loss_scaling()),
        scaled_grads=scaled,
    )


# ---- PyTorch ---------------------------------------------------------------------------------
def torch_optimizer(name: str, parameters: list, device: torch.device) -> torch.optim.Optimizer:
    """PyTorch's counterpart of ``name``: fused on a GPU (no host read of found_inf), foreach
    on the CPU (its multi-tensor path; the default there is a loop over the tensors)."""
    speed = {"fused": True} if device.type == "cuda" else {"foreach": True}
    if name == "SGD":
        return torch.optim.SGD(parameters, lr=LEARNING_RATE, **speed)
    if name == "Momentum":
        return torch.optim.SGD(parameters, lr=LEARNING_RATE, momentum=MOMENTUM, **speed)
    if name == "Adam":
        return torch.optim.Adam(parameters, lr=LEARNING_RATE, **speed)
    if name == "AdamW":
        return torch.optim.AdamW(parameters, lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY, **speed)
    raise ValueError(f"unknown optimizer {name!r}; choose from {', '.join(OPTIMIZERS)}")


def torch_run(
    name: str, params: list[np.ndarray], grads: list[np.ndarray], device: torch.device
) -> StepRun:
    """PyTorch's AMP step as its users have it: float32 parameters and gradients."""

    def on_device(array):
        return torch.from_numpy(array.astype(np.float32)).to(device)

    parameters = [torch.nn.Parameter(on_device(p)) for p in params]
    optimizer = torch_optimizer(name, parameters, device)
    scaler = torch.amp.GradScaler(
        device.type, init_scale=INIT_SCALE, growth_interval=GROWTH_INTERVAL
    )
    scaler.scale(torch.ones((), device=device))  # step() asserts that scale() ran once
    scaled = [on_device(g) for g in grads]
    for p, g in zip(parameters, scaled):
        p.grad = g.clone()

    def step():
        scaler.step(optimizer)
        scaler.update()

    def reset():
        with torch.no_grad():
            for p, g in zip(parameters, scaled):
                p.grad.copy_(g)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    return StepRun(
        step=step,
        reset=reset,
        sync=sync,
        params=lambda: [p.detach().cpu().numpy().copy() for p in parameters],
        grads=lambda: [p.grad.cpu().numpy().copy() for p in parameters],
        scale=lambda: float(scaler.get_scale()),
        scaled_grads=scaled,
    )


def step_runs(name: str, tensors: int, numel: int, device: torch.device) -> dict[str, StepRun]:
    """``{"ours": ..., "torch": ...}`` for optimizer ``name`` over the same values."""
    params, grads = initial_values(tensors, numel)
    return {"ours": ours_run(name, params, grads), "torch": torch_run(name, params, grads, device)}


# ---- checks: the timed step is a real one ----------------------------------------------------
def check_step_applies(name: str, run: StepRun) -> None:
    """One step must change every parameter tensor; a skipped (overflow) step changes none.

    Raises:
        RuntimeError: some tensors kept their values.
    """
    before = run.params()
    run.reset()
    run.step()
    run.sync()
    kept = [i for i, (a, b) in enumerate(zip(before, run.params())) if np.array_equal(a, b)]
    if kept:
        raise RuntimeError(
            f"{name}: the step left {len(kept)} of {len(before)} parameter tensors unchanged "
            f"(first: {kept[0]}): a skipped step, or a learning rate too small for their "
            "dtype; it is not the step this benchmark means to time"
        )


def check_no_overflow(name: str, run: StepRun, initial_scale: float) -> None:
    """The loss scale never dropped, so no step in between was skipped for an overflow.

    Raises:
        RuntimeError: the scale is below ``initial_scale``.
    """
    scale = run.scale()
    if scale < initial_scale:
        raise RuntimeError(
            f"{name}: the loss scale fell from {initial_scale:g} to {scale:g}: some timed "
            "steps overflowed and were skipped"
        )


# ---- timing ----------------------------------------------------------------------------------
def host_seconds(run: StepRun) -> float:
    """Host seconds of one ``run.step()``: gradients refilled and the device drained first,
    outside the timed region; the step's own work is left queued when the clock stops."""
    run.reset()
    run.sync()
    start = time.perf_counter()
    run.step()
    return time.perf_counter() - start


def host_us(
    runs: dict[str, StepRun],
    repeats: int,
    block: int,
    warmup: int,
    warmup_s: float,
    desc: str | None = None,
) -> dict[str, float]:
    """Median µs of host time per step of each run, the runs taking turns.

    Args:
        runs: name -> :class:`StepRun`.
        repeats: turns per run.
        block: timed calls per turn.
        warmup: untimed calls per run before any timing (``timing.warm_up``).
        warmup_s: the warm-up also lasts this long (``timing.warmup_seconds``).
        desc: the label of the progress bar.
    """
    for name, run in runs.items():

        def refilled_step(run=run):
            run.reset()
            run.step()

        check_step_applies(name, run)
        warm_up(refilled_step, run.sync, warmup_s, warmup)
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in progress(range(repeats), desc=desc):
        for name, run in runs.items():
            time.sleep(SETTLE_S)  # the other framework's threads go to sleep
            run.reset()
            run.step()  # untimed: wakes this framework's threads
            for _ in range(block):
                samples[name].append(host_seconds(run))
            run.sync()
    for name, run in runs.items():
        check_no_overflow(name, run, INIT_SCALE)
    return {name: statistics.median(s) * 1e6 for name, s in samples.items()}


def measure(
    optimizers: list[str],
    tensor_counts: list[int],
    numel: int,
    device: torch.device,
    repeats: int,
    block: int,
    warmup: int,
    warmup_s: float,
) -> list[tuple]:
    """``(optimizer, tensors, ours µs, PyTorch µs)`` for every optimizer and tensor count."""
    rows = []
    for name in optimizers:
        for tensors in tensor_counts:
            gc.collect()
            runs = step_runs(name, tensors, numel, device)
            us = host_us(runs, repeats, block, warmup, warmup_s, desc=f"{name} x{tensors}")
            rows.append((name, tensors, us["ours"], us["torch"]))
    return rows


# ---- the report ------------------------------------------------------------------------------
def cpu_name() -> str:
    """The CPU's model name, as /proc/cpuinfo gives it where there is one."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_line(device: torch.device) -> str:
    """Where the numbers come from: the device by name, then every version that matters."""
    env = collect_env()
    place = str(mt.get_device())
    if device.type == "cuda":
        gpu = next((g for g in env["gpus"] if g.startswith(f"{place} ")), place)
        where = f"{gpu}; CuPy {env['cupy']}, CUDA runtime {env['cuda runtime']}"
        theirs = f"PyTorch {torch.__version__} on {torch.cuda.get_device_name(device)}"
    else:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        where = f"cpu: {cpu_name()}, {cores} cores"
        theirs = f"PyTorch {torch.__version__} ({torch.get_num_threads()} threads)"
    return (
        f"{where}; minitorch_amp {mt.__version__}, Python {platform.python_version()}, "
        f"NumPy {np.__version__}; {theirs}"
    )


def print_table(rows: list) -> None:
    """The rows of :func:`measure` as one Markdown table."""
    print("| optimizer | tensors | ours µs | PyTorch µs | ours/PyTorch |")
    print("|---|---|---|---|---|")
    for name, tensors, ours, theirs in rows:
        print(f"| {name} | {tensors} | {ours:.1f} | {theirs:.1f} | {ours / theirs:.2f} |")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--optimizers",
        nargs="+",
        default=list(OPTIMIZERS),
        choices=OPTIMIZERS,
        help="which to time",
    )
    parser.add_argument(
        "--tensors", nargs="+", type=int, default=[16, 160], help="parameter tensors per model"
    )
    parser.add_argument("--numel", type=int, default=1024, help="elements per tensor")
    parser.add_argument(
        "--repeats", type=int, default=None, help="turns per framework (10; 3 with --quick)"
    )
    parser.add_argument(
        "--block", type=int, default=None, help="timed calls per turn (20; 10 with --quick)"
    )
    parser.add_argument("--warmup", type=int, default=20, help="untimed calls before timing")
    parser.add_argument("--quick", action="store_true", help="3 turns of 10 calls: rough")
    parser.add_argument("--device", default=None, help="'cpu', 'gpu' or 'gpu:N'; None: auto")
    args = parser.parse_args(argv)
    if args.device is not None:
        mt.set_device(args.device)
    device = torch_device()
    repeats = args.repeats or (3 if args.quick else 10)
    block = args.block or (10 if args.quick else 20)
    warmup_s = warmup_seconds(device.type == "cuda")
    speed = "fused=True" if device.type == "cuda" else "foreach=True"

    print(device_line(device))
    print(
        f"µs of host time per scaler.step(opt); scaler.update(), median of {repeats} turns x "
        f"{block} calls; tensors of {args.numel} elements. Ours: O2, float16 params and "
        f"grads, fp32 masters. PyTorch: float32 params and grads, {speed}."
    )
    rows = measure(
        args.optimizers, args.tensors, args.numel, device, repeats, block, args.warmup, warmup_s
    )
    print_table(rows)


if __name__ == "__main__":
    main()
