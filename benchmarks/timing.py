"""Timing two frameworks fairly in one process: interleaved blocks, settled thread pools, medians.

Both frameworks run in the same process on the same device, taking turns, so a noisy
neighbour slows both alike. They take turns in short *blocks* of steps rather than step by
step. NOTE: step-by-step alternation is wrong on a small CPU: NumPy's OpenBLAS threads spin
for about 0.1 s after each call before sleeping, and PyTorch's OpenMP threads spin too, so
the two thread pools fight over the cores and both frameworks look 20-100x slower (measured
on the 2-core development machine: a 1.2 ms SimpleNet step took 150 ms). Each block starts
after a pause that lets the other framework's threads go to sleep, with one untimed step that
wakes this framework's threads, then times ``block`` steps the way a training loop runs them.
Steps that take far longer than the spin (the tutorial's 1 s steps) can alternate one by one.

Before any timing, :func:`warm_up` runs each step untimed: once on its own (on a GPU the first
call compiles kernels with NVRTC), then for a number of steps and, on a GPU, at least a second
of sustained work, so the timed steps run at the clocks a training run would see.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable

from minitorch_amp.utils.progress import progress

SETTLE_S = 0.2  # longer than OpenBLAS's default spin (2**28 cycles, ~0.1 s)
GPU_WARMUP_S = 1.0  # sustained work before timing on a GPU: its clocks must rise first
CPU_WARMUP_S = 0.0  # the warm-up steps suffice on a CPU (caches, thread pools)

Run = tuple[Callable[[], object], Callable[[], None]]  # (step, synchronize its device)


def torch_device(required: bool = True):
    """The torch device matching ours: 'cpu', or 'cuda:N' when we run on 'gpu:N'.

    When ours runs on a GPU and this PyTorch has no CUDA there is no fair comparison: exit
    with a message, or return None when the comparison is not ``required``.
    """
    import torch  # the benchmarks compare against it; the package never needs it

    import minitorch_amp as mt

    place = str(mt.get_device())
    if place == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        if not required:
            return None
        raise SystemExit("minitorch_amp runs on a GPU but this PyTorch has no CUDA: no comparison")
    return torch.device("cuda", int(place.partition(":")[2] or 0))


def timed(step: Callable[[], object], sync: Callable[[], None]) -> float:
    """Seconds for one ``step()``, with the device drained before and after."""
    sync()
    start = time.perf_counter()
    step()
    sync()
    return time.perf_counter() - start


def warmup_seconds(on_gpu: bool) -> float:
    """How long :func:`warm_up` runs: ``GPU_WARMUP_S`` on a GPU, ``CPU_WARMUP_S`` on a CPU."""
    return GPU_WARMUP_S if on_gpu else CPU_WARMUP_S


def warm_up(
    step: Callable[[], object], sync: Callable[[], None], seconds: float, steps: int = 1
) -> int:
    """Run ``step()`` untimed until the device is warm; return how many calls that took.

    The first call runs and is waited for on its own: on a GPU it compiles the kernels the
    step needs (NVRTC, CuPy's elementwise kernels), which is no warm work. Then ``step()``
    repeats until there were ``steps`` calls in all and ``seconds`` of wall time have passed
    since the first one ended; ``sync()`` drains the queued work at the end.

    NOTE: a few calls are not a warm-up on a GPU: it idles at low clocks and needs about a
    second of sustained work to raise them. On an H100, cuBLAS measured 397 TFLOP/s after
    5 warm-up calls and 656 TFLOP/s after a sustained warm-up.
    """
    step()  # compiles what it launches: not counted in ``seconds``
    sync()
    calls = 1
    start = time.perf_counter()
    while calls < steps or time.perf_counter() - start < seconds:
        step()
        calls += 1
    sync()
    return calls


def interleave(*args, **kwargs) -> dict:
    """Median seconds per step of each run, timed in alternating blocks: the medians of
    :func:`interleave_rounds`, which takes the same arguments."""
    return interleave_rounds(*args, **kwargs)[0]


def interleave_rounds(
    runs: dict[str, Run],
    steps: int,
    warmup: int,
    block: int = 5,
    wake: int = 1,
    *,
    warmup_s: float,
    desc: str | None = None,
) -> tuple[dict, list[dict]]:
    """``(medians, rounds)``: the median seconds per step of each run, and per round (one
    turn of each run) the median of each run's block, for :func:`paired_ratio`.

    Args:
        runs: name -> ``(step, sync)``; ``sync`` waits for the run's device (no-op on a CPU).
        steps: timed steps per run.
        warmup: untimed steps per run before any timing (compilation, allocations, caches,
            autotuning).
        block: timed steps per turn.
        wake: untimed steps at the start of each turn. 0 is fine when a step takes far
            longer than waking a thread pool (tens of µs), e.g. the tutorial's 1 s steps.
        warmup_s: the warm-up also lasts at least this long after the first call
            (:func:`warmup_seconds`: 1 s of sustained work on a GPU).
        desc: the label of the progress bar (shown on a terminal with tqdm installed).
    """
    for step, sync in runs.values():
        warm_up(step, sync, warmup_s, warmup)
    times: dict[str, list[float]] = {name: [] for name in runs}
    rounds: list[dict] = []
    for _ in progress(range(math.ceil(steps / block)), desc=desc):  # a turn each per round
        this_round = {}
        for name, (step, sync) in runs.items():
            time.sleep(SETTLE_S)
            for _ in range(wake):  # untimed: wakes this framework's threads
                timed(step, sync)
            turn = [timed(step, sync) for _ in range(min(block, steps - len(times[name])))]
            times[name] += turn
            if turn:
                this_round[name] = statistics.median(turn)
        rounds.append(this_round)
    return {name: statistics.median(t) for name, t in times.items()}, rounds


def paired_ratio(rounds: list[dict], a: str, b: str) -> float:
    """The median over rounds of ``a``'s block median over ``b``'s in the same round.

    NOTE: the ratio of the two overall medians moves with the machine: on the shared 2-core
    development machine three runs of the GPT step gave 1.35, 1.32 and 1.24, while this,
    whose two blocks of a round ran seconds apart, gave 1.314, 1.308 and 1.312. A slow
    change of the machine's speed (a neighbour's load coming and going) cancels in each
    round's ratio; what is left of the noise, the median of the rounds removes.
    """
    ratios = [r[a] / r[b] for r in rounds if a in r and b in r]
    if not ratios:
        raise ValueError(f"no round timed both {a!r} and {b!r}")
    return statistics.median(ratios)
