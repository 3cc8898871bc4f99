"""``OneCycleLR``: warm up to a peak, then anneal far below the start (Paddle's formulas).

The "1cycle" policy of Smith and Topin, *Super-Convergence* (2017), as Paddle's
``paddle.optimizer.lr.OneCycleLR`` computes it, step for step.
"""

from __future__ import annotations

import math
import numbers

from .scheduler import LRScheduler, _check_number, _check_positive_int

_OWNER = "OneCycleLR"


def _non_negative(value, what: str) -> float:
    value = _check_number(value, what, _OWNER)
    if value < 0:
        raise ValueError(f"{_OWNER}: '{what}' must be >= 0, got {value}")
    return value


class OneCycleLR(LRScheduler):
    """Rise from ``max_learning_rate / divide_factor`` to ``max_learning_rate``, then fall to
    ``end_learning_rate``; step it once per batch.

    With ``p = phase_pct * total_steps`` the phases (start step, end step, from, to) are:

    * two phases (default): ``(0, p - 1, initial, max)``, ``(p - 1, total_steps - 1, max, end)``;
    * ``three_phase=True``: ``(0, p - 1, initial, max)``, ``(p - 1, 2p - 2, max, initial)``,
      ``(2p - 2, total_steps - 1, initial, end)``.

    A step belongs to the first phase whose end step it has not passed (the last phase takes
    the rest, up to ``total_steps``). With ``pct = (step - start) / (end - start)``:
    ``'cos'`` gives ``to + (from - to) / 2 * (cos(pi * pct) + 1)``, ``'linear'`` gives
    ``(to - from) * pct + from``.

    Args:
        max_learning_rate: the peak rate (>= 0).
        total_steps: how many steps the schedule lasts (a positive int); stepping past it
            raises ValueError.
        divide_factor: the first rate is ``max_learning_rate / divide_factor`` (> 0).
        end_learning_rate: the last rate (>= 0).
        phase_pct: the fraction of the steps spent rising (a float in [0, 1]; below 0.5
            with ``three_phase``).
        anneal_strategy: ``'cos'`` or ``'linear'``.
        three_phase: fall back to the first rate before the final anneal (the paper's
            schedule) instead of annealing straight to the end (fastai's).

    Example:
        >>> sched = OneCycleLR(max_learning_rate=1.0, total_steps=10, anneal_strategy="linear")
        >>> rates = []
        >>> for _ in range(10):
        ...     rates.append(round(sched(), 4))
        ...     sched.step()
        >>> rates
        [0.04, 0.52, 1.0, 0.8572, 0.7143, 0.5715, 0.4286, 0.2858, 0.1429, 0.0001]
    """

    def __init__(
        self,
        max_learning_rate,
        total_steps,
        divide_factor=25.0,
        end_learning_rate=0.0001,
        phase_pct=0.3,
        anneal_strategy="cos",
        three_phase=False,
        last_epoch=-1,
        verbose=False,
    ):
        peak = _non_negative(max_learning_rate, "max_learning_rate")
        end = _non_negative(end_learning_rate, "end_learning_rate")
        if isinstance(total_steps, bool) or not isinstance(total_steps, numbers.Integral):
            raise TypeError(f"{_OWNER}: 'total_steps' must be an int, got {total_steps!r}")
        self.total_steps = _check_positive_int(total_steps, "total_steps", _OWNER)
        divide_factor = _check_number(divide_factor, "divide_factor", _OWNER)
        if divide_factor <= 0:
            raise ValueError(f"{_OWNER}: 'divide_factor' must be > 0, got {divide_factor}")
        if not isinstance(phase_pct, float):  # Paddle takes a float only, not 0 or 1
            raise TypeError(f"{_OWNER}: 'phase_pct' must be a float, got {phase_pct!r}")
        if not 0.0 <= phase_pct <= 1.0:
            raise ValueError(f"{_OWNER}: 'phase_pct' must be in [0, 1], got {phase_pct}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"{_OWNER}: 'anneal_strategy' must be 'cos' or 'linear', got {anneal_strategy!r}"
            )
        self.anneal_strategy = anneal_strategy
        initial = peak / divide_factor
        p, last = phase_pct * self.total_steps, self.total_steps - 1
        if three_phase:
            if phase_pct >= 0.5:
                raise ValueError(
                    f"{_OWNER}: with three_phase=True 'phase_pct' must be below 0.5 (the rise "
                    f"and the fall back each take phase_pct of the steps), got {phase_pct}"
                )
            phases = [(0, p - 1, initial, peak), (p - 1, 2 * p - 2, peak, initial)]
            phases.append((2 * p - 2, last, initial, end))
        else:
            phases = [(0, p - 1, initial, peak), (p - 1, last, peak, end)]
        names = ("the rise", "the fall back", "the final anneal") if three_phase else ()
        for name, (start, stop, _, _) in zip(names or ("the rise", "the fall"), phases):
            if stop == start:  # Paddle divides by zero here, when the phase is reached
                fix = (
                    "change phase_pct so that phase_pct * total_steps is not 1"
                    if start == 0
                    else "use a phase_pct below 1.0, so that some steps are left to anneal"
                )
                raise ValueError(
                    f"{_OWNER}: {name}, from step {start:g} to step {stop:g}, has no length "
                    f"(phase_pct={phase_pct}, total_steps={total_steps}); {fix}"
                )
        self._phases = tuple(phases)
        super().__init__(initial, last_epoch, verbose)

    def get_lr(self) -> float:
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(
                f"{_OWNER}: step {step} is past total_steps={self.total_steps}, where the "
                "schedule ends; create it with total_steps covering the whole run"
            )
        *earlier, final = self._phases
        start, stop, lr_from, lr_to = next((ph for ph in earlier if step <= ph[1]), final)
        pct = (step - start) / (stop - start)
        if self.anneal_strategy == "cos":
            return lr_to + (lr_from - lr_to) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (lr_to - lr_from) * pct + lr_from

    def _check_epoch(self, epoch: int, where: str) -> None:
        if epoch > self.total_steps:
            raise ValueError(
                f"{where}['last_epoch'] is {epoch}, past "
                f"total_steps={self.total_steps}, where this schedule ends; the state was saved "
                f"from a longer schedule: create OneCycleLR with total_steps >= {epoch}"
            )
