"""Paddle's other per-epoch formulas: Noam, piecewise, natural-exponential, inverse-time,
polynomial, multiplicative and linear schedules (``paddle.optimizer.lr``, line for line).

Each ``get_lr`` is Paddle's, in the same float operations, so the rates agree bit for bit.
"""

from __future__ import annotations

import itertools
import math

from .scheduler import (
    LRScheduler,
    _called_factor,
    _check_lr_lambda,
    _check_non_negative,
    _check_number,
    _check_positive_int,
    _is_int,
)


class NoamDecay(LRScheduler):
    """The Transformer's schedule (*Attention Is All You Need*): a linear warmup, then
    ``1/sqrt(epoch)``.

    ``lr = learning_rate * d_model ** -0.5 * min(epoch ** -0.5, epoch * warmup_steps ** -1.5)``
    (at epoch 0 the first term is 1).
    """

    def __init__(self, d_model, warmup_steps, learning_rate=1.0, last_epoch=-1, verbose=False):
        for what, value in (("d_model", d_model), ("warmup_steps", warmup_steps)):
            if _check_number(value, what, "NoamDecay") <= 0:
                raise ValueError(f"NoamDecay: '{what}' must be greater than 0, got {value}")
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        a = 1 if self.last_epoch == 0 else self.last_epoch**-0.5
        b = self.warmup_steps**-1.5 * self.last_epoch
        return self.base_lr * (self.d_model**-0.5) * min(a, b)


class PiecewiseDecay(LRScheduler):
    """``values[i]`` while ``last_epoch < boundaries[i]`` (the first such ``i``); the last value
    after the last boundary.

    Args:
        boundaries: increasing epochs (ints).
        values: the rates (>= 0), at least one more than ``boundaries``.
    """

    def __init__(self, boundaries, values, last_epoch=-1, verbose=False):
        owner = "PiecewiseDecay"
        if not isinstance(boundaries, (list, tuple)) or not isinstance(values, (list, tuple)):
            raise TypeError(f"{owner}: 'boundaries' and 'values' must be lists or tuples")
        if len(boundaries) == 0:
            raise ValueError(f"{owner}: 'boundaries' cannot be empty")
        if len(values) <= len(boundaries):
            raise ValueError(
                f"{owner}: 'values' needs one more element than 'boundaries' (the rate after "
                f"the last boundary), got len(values)={len(values)}, "
                f"len(boundaries)={len(boundaries)}"
            )
        if not all(map(_is_int, boundaries)) or any(
            a >= b for a, b in itertools.pairwise(boundaries)
        ):
            raise ValueError(f"{owner}: 'boundaries' must be increasing ints, got {boundaries}")
        values = [_check_non_negative(v, "values", owner) for v in values]
        self.boundaries = [int(b) for b in boundaries]
        self.values = values
        super().__init__(last_epoch=last_epoch, verbose=verbose)

    def get_lr(self) -> float:
        for i in range(len(self.boundaries)):
            if self.last_epoch < self.boundaries[i]:
                return self.values[i]
        return self.values[len(self.values) - 1]


class NaturalExpDecay(LRScheduler):
    """``lr = learning_rate * exp(-gamma * epoch)`` (``gamma`` > 0)."""

    def __init__(self, learning_rate, gamma, last_epoch=-1, verbose=False):
        self.gamma = _check_number(gamma, "gamma", "NaturalExpDecay")
        if not self.gamma > 0.0:
            raise ValueError(
                f"NaturalExpDecay: 'gamma' must be > 0 so that the rate decays, got {gamma}"
            )
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        return self.base_lr * math.exp(-1 * self.gamma * self.last_epoch)


class InverseTimeDecay(LRScheduler):
    """``lr = learning_rate / (1 + gamma * epoch)`` (``gamma`` >= 0)."""

    def __init__(self, learning_rate, gamma, last_epoch=-1, verbose=False):
        self.gamma = _check_non_negative(gamma, "gamma", "InverseTimeDecay")
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        return self.base_lr / (1 + self.gamma * self.last_epoch)


class PolynomialDecay(LRScheduler):
    """From ``learning_rate`` down to ``end_lr`` along ``(1 - epoch / decay_steps) ** power``.

    ``lr = (learning_rate - end_lr) * (1 - epoch / steps) ** power + end_lr`` where, with
    ``cycle=False``, ``epoch`` stops at ``steps = decay_steps`` (the rate stays at ``end_lr``);
    with ``cycle=True``, ``steps = decay_steps * ceil(epoch / decay_steps)`` (1 at epoch 0): the
    rate jumps back up at each multiple of ``decay_steps`` and decays over a longer span.
    """

    def __init__(
        self,
        learning_rate,
        decay_steps,
        end_lr=0.0001,
        power=1.0,
        cycle=False,
        last_epoch=-1,
        verbose=False,
    ):
        owner = "PolynomialDecay"
        self.decay_steps = _check_positive_int(decay_steps, "decay_steps", owner)
        self.end_lr = _check_non_negative(end_lr, "end_lr", owner)
        self.power = _check_number(power, "power", owner)
        if not self.power > 0.0:
            raise ValueError(f"{owner}: 'power' must be > 0 so that the rate decays, got {power}")
        if not isinstance(cycle, bool):
            raise TypeError(f"{owner}: 'cycle' must be True or False, got {cycle!r}")
        self.cycle = cycle
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        tmp_epoch_num = self.last_epoch
        tmp_decay_steps = self.decay_steps
        if self.cycle:
            div_res = math.ceil(float(self.last_epoch) / float(self.decay_steps))
            if self.last_epoch == 0:
                div_res = 1
            tmp_decay_steps = self.decay_steps * div_res
        else:
            tmp_epoch_num = min(self.last_epoch, self.decay_steps)
        fraction = float(tmp_epoch_num) / float(tmp_decay_steps)
        return (self.base_lr - self.end_lr) * ((1 - fraction) ** self.power) + self.end_lr


class MultiplicativeDecay(LRScheduler):
    """``lr_epoch = lr_{epoch-1} * lr_lambda(epoch)``, from ``learning_rate`` at epoch 0.

    NOTE: Paddle recomputes the product ``learning_rate * lr_lambda(1) * ... * lr_lambda(epoch)``
    at every step (quadratic in the run's length). Here a step to the next epoch multiplies
    the previous product by one factor: the same float operations, so the same rates, with
    ``lr_lambda`` called once per step (a function with side effects sees fewer calls).
    ``step(epoch)`` and a loaded state recompute the whole product, as Paddle does.
    """

    def __init__(self, learning_rate, lr_lambda, last_epoch=-1, verbose=False):
        self.lr_lambda = _check_lr_lambda(lr_lambda, "MultiplicativeDecay", "lambda epoch: 0.95")
        self._product = (0, _check_number(learning_rate, "learning_rate", "MultiplicativeDecay"))
        super().__init__(learning_rate, last_epoch, verbose)

    def _factor(self, epoch: int) -> float:
        return _called_factor(self.lr_lambda, epoch, "MultiplicativeDecay", "the previous rate")

    def get_lr(self) -> float:
        done, cur_lr = self._product
        if done != self.last_epoch - 1 or self.last_epoch < 1:
            done, cur_lr = 0, self.base_lr
        for epoch in range(done + 1, self.last_epoch + 1):
            cur_lr = cur_lr * self._factor(epoch)
        self._product = (self.last_epoch, cur_lr)
        return cur_lr

    def _load_state(self, state_dict) -> None:
        super()._load_state(state_dict)
        self._product = (0, self.base_lr)  # the next step recomputes the whole product


class LinearLR(LRScheduler):
    """From ``start_factor * learning_rate`` to ``end_factor * learning_rate`` in
    ``total_steps`` steps, then constant; Paddle's recursion on ``last_lr``:

    ``lr_0 = learning_rate * start_factor``, and for ``0 < epoch <= total_steps``
    ``lr_epoch = lr_{epoch-1} * (1 + (end - start) / (total_steps * start + (epoch - 1) *
    (end - start)))``; past ``total_steps`` the rate stays.

    NOTE: ``step(epoch)`` applies one factor, for ``epoch``, to the current rate (Paddle has
    no closed form here): jump only along a run, or reload a state instead.
    """

    def __init__(
        self,
        learning_rate,
        total_steps,
        start_factor=1.0 / 3,
        end_factor=1.0,
        last_epoch=-1,
        verbose=False,
    ):
        owner = "LinearLR"
        if not 0 < _check_number(start_factor, "start_factor", owner) <= 1.0:
            raise ValueError(f"{owner}: 'start_factor' must be in (0, 1], got {start_factor}")
        if not 0 <= _check_number(end_factor, "end_factor", owner) <= 1.0:
            raise ValueError(f"{owner}: 'end_factor' must be in [0, 1], got {end_factor}")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_steps = _check_positive_int(total_steps, "total_steps", owner)
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        if self.last_epoch == 0:
            return self.base_lr * self.start_factor
        if self.last_epoch > self.total_steps:
            return self.last_lr
        base_lr = self.total_steps * self.start_factor
        cur_factor = self.end_factor - self.start_factor
        factor = 1.0 + cur_factor / (base_lr + (self.last_epoch - 1) * cur_factor)
        return self.last_lr * factor
