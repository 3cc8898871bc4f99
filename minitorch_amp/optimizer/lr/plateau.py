"""``ReduceOnPlateau``: cut the rate when a metric stops improving (Paddle's rules).

Unlike the other schedulers it is not a function of the epoch: ``step(metrics)`` feeds it the
metric (a loss, usually) and it keeps ``best``, ``num_bad_epochs`` and ``cooldown_counter``.
"""

from __future__ import annotations

import numbers

import numpy as np

from ...autograd.tensor import Tensor
from ...backend.dtypes import is_floating
from .scheduler import (
    LRScheduler,
    _check_epoch_arg,
    _check_learning_rate,
    _check_non_negative,
    _check_number,
    _is_int,
)

_OWNER = "ReduceOnPlateau"


def _metric(metrics) -> float:
    """A float, or a Tensor / NumPy value with one element, as a Python float."""
    if isinstance(metrics, (Tensor, np.ndarray, np.generic)):
        array = metrics.numpy() if isinstance(metrics, Tensor) else np.asarray(metrics)
        if array.size != 1 or not (array.dtype.kind in "iuf" or is_floating(array.dtype)):
            raise ValueError(
                f"{_OWNER}.step: 'metrics' must hold one number, got shape {list(array.shape)} "
                f"of {array.dtype}; reduce it first (for example loss.mean())"
            )
        return float(array.reshape(-1)[0])
    if isinstance(metrics, bool) or not isinstance(metrics, numbers.Real):
        raise TypeError(
            f"{_OWNER}.step: 'metrics' must be a float, int, NumPy value or one-element Tensor, "
            f"got {type(metrics).__name__}"
        )
    return float(metrics)


def _non_negative_int(value, what: str) -> int:
    if not _is_int(value) or value < 0:
        raise ValueError(f"{_OWNER}: '{what}' must be an integer >= 0, got {value!r}")
    return int(value)


class ReduceOnPlateau(LRScheduler):
    """Multiply the rate by ``factor`` when the metric has not improved for more than
    ``patience`` steps; then wait ``cooldown`` steps before counting again.

    Improving means (``mode``, ``threshold_mode``): ``'min', 'rel'``: below
    ``best - best * threshold``; ``'min', 'abs'``: below ``best - threshold``; ``'max'``
    likewise above ``best + ...``. A cut gives ``max(last_lr * factor, min_lr)``, and is skipped
    when it would change the rate by no more than ``epsilon``.

    Call ``step(metrics)`` once per epoch (or per evaluation) with the metric; the optimizer
    reads the rate as from any scheduler. ``last_epoch`` starts at 0 and counts the steps.

    Example:
        >>> sched = ReduceOnPlateau(learning_rate=1.0, factor=0.5, patience=1)
        >>> for loss in [3.0, 2.0, 2.5, 2.4, 2.6]:
        ...     sched.step(loss)
        >>> sched(), sched.num_bad_epochs
        (0.5, 1)
    """

    def __init__(
        self,
        learning_rate,
        mode="min",
        factor=0.1,
        patience=10,
        threshold=1e-4,
        threshold_mode="rel",
        cooldown=0,
        min_lr=0,
        epsilon=1e-8,
        verbose=False,
    ):
        if not isinstance(mode, str) or mode.lower() not in ("min", "max"):
            raise ValueError(f"{_OWNER}: 'mode' must be 'min' or 'max', got {mode!r}")
        if not _check_number(factor, "factor", _OWNER) < 1.0:
            raise ValueError(
                f"{_OWNER}: 'factor' must be < 1.0 (new_lr = lr * factor), got {factor}"
            )
        if not isinstance(threshold_mode, str) or threshold_mode.lower() not in ("rel", "abs"):
            raise ValueError(
                f"{_OWNER}: 'threshold_mode' must be 'rel' or 'abs', got {threshold_mode!r}"
            )
        self.patience = _non_negative_int(patience, "patience")
        self.threshold = _check_non_negative(threshold, "threshold", _OWNER)
        self.cooldown = _non_negative_int(cooldown, "cooldown")
        self.min_lr = _check_non_negative(min_lr, "min_lr", _OWNER)
        self.epsilon = _check_non_negative(epsilon, "epsilon", _OWNER)
        self.base_lr = _check_learning_rate(learning_rate, _OWNER)
        self.mode, self.threshold_mode, self.factor = mode.lower(), threshold_mode.lower(), factor
        self.cooldown_counter = 0
        self.best = None
        self.num_bad_epochs = 0
        self.last_lr = self.base_lr
        self.last_epoch = 0  # Paddle does not take a step at construction here
        self.verbose = verbose

    _state_keys = ("cooldown_counter", "best", "num_bad_epochs", "last_epoch", "last_lr")

    def step(self, metrics, epoch=None) -> None:
        """Feed the metric of the epoch just finished; ``epoch`` sets ``last_epoch``."""
        current = _metric(metrics)
        epoch = self.last_epoch + 1 if epoch is None else _check_epoch_arg(epoch, "step(epoch=...)")
        self.last_epoch = epoch
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            return
        if self.best is None or self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.num_bad_epochs > self.patience:
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
            new_lr = max(self.last_lr * self.factor, self.min_lr)
            if self.last_lr - new_lr > self.epsilon:
                self.last_lr = new_lr
                self._print_rate()

    def _is_better(self, current: float, best: float) -> bool:
        if self.mode == "min" and self.threshold_mode == "rel":
            return current < best - best * self.threshold
        if self.mode == "min" and self.threshold_mode == "abs":
            return current < best - self.threshold
        if self.mode == "max" and self.threshold_mode == "rel":
            return current > best + best * self.threshold
        return current > best + self.threshold

    def get_lr(self) -> float:
        return self.last_lr

    def _check_extra(self, state_dict: dict, where: str) -> None:
        for key in ("cooldown_counter", "num_bad_epochs"):
            if not _is_int(state_dict[key]) or state_dict[key] < 0:
                raise ValueError(
                    f"{where}[{key!r}] must be an integer >= 0, got {state_dict[key]!r}"
                )
        best = state_dict["best"]
        if best is not None:  # (Paddle saves the metric it was given: a NumPy value too)
            try:
                _metric(best)
            except (TypeError, ValueError):
                raise TypeError(f"{where}['best'] must be None or a number, got {best!r}") from None

    def _load_state(self, state_dict) -> None:
        super()._load_state(state_dict)
        self.cooldown_counter = int(state_dict["cooldown_counter"])
        self.num_bad_epochs = int(state_dict["num_bad_epochs"])
        self.best = None if state_dict["best"] is None else _metric(state_dict["best"])
