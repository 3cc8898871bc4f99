"""Schedules that come back up: ``CyclicLR`` (triangles between two rates) and
``CosineAnnealingWarmRestarts`` (SGDR's cosine with restarts), Paddle's formulas line for line.
"""

from __future__ import annotations

import math
import numbers

from .scheduler import LRScheduler, _check_number, _check_positive_int, _is_int

_MODES = ("triangular", "triangular2", "exp_range")


class CyclicLR(LRScheduler):
    """Cycle between ``base_learning_rate`` and ``max_learning_rate``: up in ``step_size_up``
    steps, down in ``step_size_down``; step it once per batch.

    With ``cycle = 1 + epoch // cycle_size`` and ``pct = 1 + epoch / cycle_size - cycle``:
    ``lr = base + (max - base) * h * scale_fn(x)``, ``h = pct / up_pct`` on the way up,
    ``(1 - pct) / (1 - up_pct)`` on the way down; ``x`` is ``cycle`` (``scale_mode='cycle'``)
    or ``epoch`` (``'iterations'``). ``mode`` picks ``scale_fn``: ``'triangular'`` 1,
    ``'triangular2'`` ``1 / 2 ** (cycle - 1)``, ``'exp_range'`` ``exp_gamma ** epoch``; a
    ``scale_fn`` of the user's replaces it (and then ``scale_mode`` applies).
    """

    def __init__(
        self,
        base_learning_rate,
        max_learning_rate,
        step_size_up,
        step_size_down=None,
        mode="triangular",
        exp_gamma=1.0,
        scale_fn=None,
        scale_mode="cycle",
        last_epoch=-1,
        verbose=False,
    ):
        owner = "CyclicLR"
        if _check_number(max_learning_rate, "max_learning_rate", owner) < 0:
            raise ValueError(f"{owner}: 'max_learning_rate' must be >= 0, got {max_learning_rate}")
        if not _is_int(step_size_up) or step_size_up <= 0:
            raise ValueError(
                f"{owner}: 'step_size_up' must be a positive int, got {step_size_up!r}"
            )
        if step_size_down is not None:
            _check_positive_int(step_size_down, "step_size_down", owner)
        if isinstance(exp_gamma, bool) or not isinstance(exp_gamma, float):  # Paddle: a float
            raise TypeError(f"{owner}: 'exp_gamma' must be a float, got {exp_gamma!r}")
        if mode not in _MODES and scale_fn is None:
            raise ValueError(
                f"{owner}: 'mode' must be one of {_MODES} (or pass a scale_fn), got {mode!r}"
            )
        if scale_fn is not None and not callable(scale_fn):
            raise TypeError(f"{owner}: 'scale_fn' must be a function, got {scale_fn!r}")
        if scale_mode not in ("cycle", "iterations"):
            raise ValueError(
                f"{owner}: 'scale_mode' must be 'cycle' or 'iterations', got {scale_mode!r}"
            )
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.cycle_size = up + down
        self.step_up_pct = up / self.cycle_size
        self.max_lr = float(max_learning_rate)
        base = _check_number(base_learning_rate, "base_learning_rate", owner)
        self.amplitude = self.max_lr - base
        self.mode = mode
        self.gamma = exp_gamma  # only for exp_range
        if scale_fn is None:
            self.scale_fn = getattr(self, f"_{mode}_scale_fn")
            self.scale_mode = "iterations" if mode == "exp_range" else "cycle"
        else:
            self.scale_fn = scale_fn
            self.scale_mode = scale_mode
        super().__init__(base_learning_rate, last_epoch, verbose)

    def _triangular_scale_fn(self, x):
        return 1.0

    def _triangular2_scale_fn(self, x):
        return 1 / (2.0 ** (x - 1))

    def _exp_range_scale_fn(self, x):
        return self.gamma**x

    def get_lr(self) -> float:
        iterations = self.last_epoch
        cycle = 1 + iterations // self.cycle_size
        pct_per_cycle = 1.0 + iterations / self.cycle_size - cycle
        if pct_per_cycle <= self.step_up_pct:
            scale_factor = pct_per_cycle / self.step_up_pct
        else:
            scale_factor = (1 - pct_per_cycle) / (1 - self.step_up_pct)
        base_height = self.amplitude * scale_factor
        x = cycle if self.scale_mode == "cycle" else iterations
        return self.base_lr + base_height * self.scale_fn(x)


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine from ``learning_rate`` to ``eta_min`` over ``T_i`` steps, then restart; the
    first period is ``T_0`` steps, each next one ``T_mult`` times longer.

    ``lr = eta_min + (learning_rate - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2`` where
    ``T_cur`` counts the steps since the last restart. ``step(epoch)`` places ``epoch`` (a
    number >= 0; fractions of an epoch allowed) in its period, as Paddle does.

    The state holds ``T_cur`` and ``T_i`` as well (Paddle saves only ``last_epoch`` and
    ``last_lr``, so its reloaded scheduler restarts its period); a state without them (saved
    by Paddle) places ``last_epoch`` in its period as ``step(epoch)`` would.
    """

    def __init__(self, learning_rate, T_0, T_mult=1, eta_min=0, last_epoch=-1, verbose=False):  # noqa: N803
        owner = "CosineAnnealingWarmRestarts"
        self.T_0 = _check_positive_int(T_0, "T_0", owner)
        if not _is_int(T_mult) or T_mult < 1:
            raise ValueError(f"{owner}: 'T_mult' must be an integer >= 1, got {T_mult!r}")
        self.T_mult = int(T_mult)
        self.eta_min = _check_number(eta_min, "eta_min", owner)
        self.T_i = self.T_0
        self.T_cur = last_epoch
        super().__init__(learning_rate, last_epoch, verbose)

    _optional_keys = ("T_cur", "T_i")

    def get_lr(self) -> float:
        return self._lr(self.T_cur, self.T_i)

    def _lr(self, t_cur, t_i) -> float:
        return (
            self.eta_min + (self.base_lr - self.eta_min) * (1 + math.cos(math.pi * t_cur / t_i)) / 2
        )

    def _place(self, epoch):
        """``(T_cur, T_i)`` for an ``epoch`` given to ``step(epoch)`` (Paddle's arithmetic)."""
        if epoch < self.T_0:
            return epoch, self.T_0
        if self.T_mult == 1:
            return epoch % self.T_0, self.T_i
        n = int(math.log((epoch / self.T_0 * (self.T_mult - 1) + 1), self.T_mult))
        t_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
        return t_cur, self.T_0 * self.T_mult ** (n)

    def step(self, epoch=None) -> None:
        """Advance one step (``T_cur + 1``, restarting past ``T_i``), or go to ``epoch``."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch, t_cur, t_i = self.last_epoch + 1, self.T_cur + 1, self.T_i
            if t_cur >= t_i:
                t_cur, t_i = t_cur - t_i, t_i * self.T_mult
        else:
            if isinstance(epoch, bool) or not isinstance(epoch, numbers.Real) or not epoch >= 0:
                raise ValueError(f"step(epoch=...) must be a number >= 0, got {epoch!r}")
            t_cur, t_i = self._place(epoch)
        rate = self._lr(t_cur, t_i)
        self.T_cur, self.T_i, self.last_epoch, self.last_lr = t_cur, t_i, math.floor(epoch), rate
        self._print_rate()

    def _check_extra(self, state_dict: dict, where: str) -> None:
        for key, low in (("T_cur", 0), ("T_i", 1)):
            value = state_dict.get(key, low)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(f"{where}[{key!r}] must be a number, got {value!r}")
            if not value >= low:
                raise ValueError(f"{where}[{key!r}] must be >= {low}, got {value}")

    def _load_state(self, state_dict) -> None:
        super()._load_state(state_dict)
        if "T_cur" not in state_dict or "T_i" not in state_dict:
            self.T_cur, self.T_i = self._place(self.last_epoch)
