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
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

SETTLE_S = 0.2  # longer than OpenBLAS's default spin (2**28 cycles, ~0.1 s)

Run = tuple[Callable[[], object], Callable[[], None]]  # (step, synchronize its device)


def timed(step: Callable[[], object], sync: Callable[[], None]) -> float:
    """Seconds for one ``step()``, with the device drained before and after."""
    sync()
    start = time.perf_counter()
    step()
    sync()
    return time.perf_counter() - start


def interleave(
    runs: dict[str, Run], steps: int, warmup: int, block: int = 5, wake: int = 1
) -> dict:
    """Median seconds per step of each run, timed in alternating blocks.

    Args:
        runs: name -> ``(step, sync)``; ``sync`` waits for the run's device (no-op on a CPU).
        steps: timed steps per run.
        warmup: untimed steps per run before any timing (allocations, caches, autotuning).
        block: timed steps per turn.
        wake: untimed steps at the start of each turn. 0 is fine when a step takes far
            longer than waking a thread pool (tens of µs), e.g. the tutorial's 1 s steps.
    """
    for step, sync in runs.values():
        for _ in range(warmup):
            step()
        sync()
    times: dict[str, list[float]] = {name: [] for name in runs}
    while any(len(t) < steps for t in times.values()):
        for name, (step, sync) in runs.items():
            time.sleep(SETTLE_S)
            for _ in range(wake):  # untimed: wakes this framework's threads
                timed(step, sync)
            for _ in range(min(block, steps - len(times[name]))):
                times[name].append(timed(step, sync))
    return {name: statistics.median(t) for name, t in times.items()}
