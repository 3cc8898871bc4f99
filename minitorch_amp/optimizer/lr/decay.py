"""The decay schedules: step, multi-step, exponential, cosine, a user's function, warmup."""

from __future__ import annotations

import itertools
import math

from .scheduler import (
    LRScheduler,
    _called_factor,
    _check_decay_gamma,
    _check_lr_lambda,
    _check_number,
    _check_positive_int,
)


class StepDecay(LRScheduler):
    """Multiply by ``gamma`` every ``step_size`` epochs.

    ``lr = base_lr * gamma ** (last_epoch // step_size)``
    """

    def __init__(self, learning_rate, step_size, gamma=0.1, last_epoch=-1, verbose=False):
        self.step_size = _check_positive_int(step_size, "step_size", "StepDecay")
        self.gamma = _check_decay_gamma(gamma, "StepDecay")
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        return self.base_lr * self.gamma ** (self.last_epoch // self.step_size)


class MultiStepDecay(LRScheduler):
    """Multiply by ``gamma`` at each milestone epoch.

    ``lr = base_lr * gamma ** (number of milestones <= last_epoch)``
    """

    def __init__(self, learning_rate, milestones, gamma=0.1, last_epoch=-1, verbose=False):
        if not isinstance(milestones, (list, tuple)) or not milestones:
            raise TypeError(
                f"MultiStepDecay: 'milestones' must be a non-empty list or tuple of ints, "
                f"got {milestones!r}"
            )
        milestones = [_check_positive_int(m, "milestones", "MultiStepDecay") for m in milestones]
        if any(a >= b for a, b in itertools.pairwise(milestones)):
            raise ValueError(
                f"MultiStepDecay: 'milestones' must be strictly increasing, got {milestones}"
            )
        self.milestones = milestones
        self.gamma = _check_decay_gamma(gamma, "MultiStepDecay")
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        passed = sum(1 for m in self.milestones if self.last_epoch >= m)
        return self.base_lr * self.gamma**passed


class ExponentialDecay(LRScheduler):
    """``lr = base_lr * gamma ** last_epoch``."""

    def __init__(self, learning_rate, gamma, last_epoch=-1, verbose=False):
        self.gamma = _check_decay_gamma(gamma, "ExponentialDecay")
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        return self.base_lr * self.gamma**self.last_epoch


class CosineAnnealingDecay(LRScheduler):
    """Cosine annealing from ``base_lr`` down to ``eta_min`` over ``T_max`` epochs, Paddle's way.

    ``step()`` follows Paddle's recursion on ``last_lr`` (``t = last_epoch``, ``T = T_max``):
    ``lr_t = eta_min + (1 + cos(pi t/T)) / (1 + cos(pi (t-1)/T)) * (lr_{t-1} - eta_min)``,
    and where that denominator is 0 (``t - 1 = T, 3T, 5T, ...``)
    ``lr_t = lr_{t-1} + (base_lr - eta_min) * (1 - cos(pi/T)) / 2``; ``lr_0 = base_lr``.
    ``step(epoch)`` uses the closed form
    ``lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * last_epoch / T_max)) / 2``.

    NOTE: the two agree (to rounding) only along a run from scratch. The recursion continues
    from whatever ``last_lr`` is: built with ``last_epoch=k`` the first rate is
    ``lr_{k+1}`` computed from ``lr_k = base_lr``, and after ``set_state_dict`` it continues
    from the loaded ``last_lr`` even when that is off this curve. Paddle does the same.
    """

    def __init__(self, learning_rate, T_max, eta_min=0, last_epoch=-1, verbose=False):  # noqa: N803
        self.T_max = _check_positive_int(T_max, "T_max", "CosineAnnealingDecay")
        self.eta_min = _check_number(eta_min, "eta_min", "CosineAnnealingDecay")
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        epoch, t_max = self.last_epoch, self.T_max
        if epoch == 0:
            return self.base_lr
        if (epoch - 1 - t_max) % (2 * t_max) == 0:
            return (
                self.last_lr + (self.base_lr - self.eta_min) * (1 - math.cos(math.pi / t_max)) / 2
            )
        ratio = (1 + math.cos(math.pi * epoch / t_max)) / (
            1 + math.cos(math.pi * (epoch - 1) / t_max)
        )
        return ratio * (self.last_lr - self.eta_min) + self.eta_min

    def _get_closed_form_lr(self) -> float:
        cosine = 1 + math.cos(math.pi * self.last_epoch / self.T_max)
        return self.eta_min + (self.base_lr - self.eta_min) * cosine / 2


class LambdaDecay(LRScheduler):
    """``lr = base_lr * lr_lambda(last_epoch)``: a factor from the user's function.

    Args:
        learning_rate: ``base_lr``, the rate the factor multiplies.
        lr_lambda: a function of the epoch (an int, 0 first) returning a number.

    Example:
        >>> sched = LambdaDecay(learning_rate=0.5, lr_lambda=lambda epoch: 0.9**epoch)
        >>> sched()
        0.5
        >>> sched.step()
        >>> round(sched(), 6)
        0.45
    """

    def __init__(self, learning_rate, lr_lambda, last_epoch=-1, verbose=False):
        self.lr_lambda = _check_lr_lambda(lr_lambda, "LambdaDecay", "lambda epoch: 0.95**epoch")
        super().__init__(learning_rate, last_epoch, verbose)

    def get_lr(self) -> float:
        epoch = self.last_epoch
        factor = _called_factor(self.lr_lambda, epoch, "LambdaDecay", "learning_rate")
        return self.base_lr * float(factor)


class LinearWarmup(LRScheduler):
    """Rise linearly from ``start_lr`` to ``end_lr`` over ``warmup_steps``, then hand over.

    ``lr = start_lr + (end_lr - start_lr) * last_epoch / warmup_steps`` while
    ``last_epoch < warmup_steps``; afterwards ``learning_rate`` (a number, or a scheduler that
    is stepped to ``last_epoch - warmup_steps``).

    Args:
        learning_rate: the rate after warmup: a float or another LRScheduler.
        warmup_steps: how many steps the warmup lasts (a positive int).
        start_lr: the rate at step 0.
        end_lr: the rate reached at ``warmup_steps`` (must exceed ``start_lr``).
    """

    def __init__(self, learning_rate, warmup_steps, start_lr, end_lr, last_epoch=-1, verbose=False):
        if not isinstance(learning_rate, LRScheduler):
            learning_rate = _check_number(learning_rate, "learning_rate", "LinearWarmup")
        self.learning_rate = learning_rate
        self.warmup_steps = _check_positive_int(warmup_steps, "warmup_steps", "LinearWarmup")
        self.start_lr = _check_number(start_lr, "start_lr", "LinearWarmup")
        self.end_lr = _check_number(end_lr, "end_lr", "LinearWarmup")
        if not self.end_lr > self.start_lr:
            raise ValueError(
                f"LinearWarmup: end_lr ({end_lr}) must be greater than start_lr ({start_lr})"
            )
        super().__init__(start_lr, last_epoch, verbose)

    def get_lr(self) -> float:
        if self.last_epoch < self.warmup_steps:
            frac = self.last_epoch / self.warmup_steps
            return self.start_lr + (self.end_lr - self.start_lr) * frac
        if isinstance(self.learning_rate, LRScheduler):
            self.learning_rate.step(self.last_epoch - self.warmup_steps)
            return self.learning_rate()
        return self.learning_rate

    def state_dict(self) -> dict:
        state = super().state_dict()
        if isinstance(self.learning_rate, LRScheduler):
            state["LinearWarmup_LR"] = self.learning_rate.state_dict()
        return state

    _nested_keys = ("LinearWarmup_LR",)

    def _nested(self) -> dict:
        """The wrapped scheduler's state is ``state['LinearWarmup_LR']`` (Paddle's key)."""
        if isinstance(self.learning_rate, LRScheduler):
            return {"LinearWarmup_LR": self.learning_rate}
        return {}
